//! The kubelet's expansion of a container's `command` and `args`: what the process is handed
//! is not the pod spec's text. `$(NAME)` is replaced by the container's variable `NAME` when it
//! has one (and left as written when not), and `$$` becomes `$`
//! (`ExpandContainerCommandAndArgs` in `pkg/kubelet/container/helpers.go`, over
//! `third_party/forked/golang/expansion/expand.go`; the `command` field's API documentation:
//! "Double $$ are reduced to a single $, which allows for escaping the $(VAR_NAME) syntax").
//! So a pod spec carries an argv verbatim only with every `$` doubled ([`escape`]), which is
//! what `nodejob_core::build` does; the fake's kubelet and the node agent hand their programs
//! the [`expand`]ed argv, as a real kubelet does.

/// `text` as the kubelet expands it, `vars` giving the container's variables by name.
/// A port of the kubelet's `expansion.Expand` with `MappingFuncFor(vars)`.
pub fn expand(text: &str, vars: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let mut chars = after.chars();
        match chars.next() {
            // A `$` at the very end is kept.
            None => {
                out.push('$');
                rest = after;
            }
            // `$$`: an escaped `$`.
            Some('$') => {
                out.push('$');
                rest = &after[1..];
            }
            Some('(') => match after.find(')') {
                Some(close) => {
                    let name = &after[1..close];
                    match vars(name) {
                        Some(value) => out.push_str(&value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &after[close + 1..];
                }
                // An unclosed reference is kept as written.
                None => {
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            // `$` before anything else is kept, with what follows.
            Some(c) => {
                out.push('$');
                out.push(c);
                rest = &after[c.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `text` with every `$` doubled: what [`expand`] turns back into `text`, whatever the
/// container's variables.
pub fn escape(text: &str) -> String {
    text.replace('$', "$$")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(name: &str) -> Option<String> {
        (name == "HOME").then(|| "/root".to_string())
    }

    #[test]
    fn expands_as_the_kubelet() {
        // The cases of the kubelet's own expand_test.go that bear on an argv.
        let table = [
            ("$(HOME)", "/root"),
            ("x$(HOME)y", "x/rooty"),
            ("$(MISSING)", "$(MISSING)"),
            ("$$", "$"),
            ("$$(HOME)", "$(HOME)"),
            ("$$$(HOME)", "$/root"),
            ("$HOME", "$HOME"),
            ("$", "$"),
            ("a$", "a$"),
            ("$(HOME", "$(HOME"),
            ("$()", "$()"),
            ("$é", "$é"),
            ("no dollar", "no dollar"),
        ];
        for (text, want) in table {
            assert_eq!(expand(text, home), want, "{text:?}");
        }
    }

    #[test]
    fn an_escaped_text_expands_to_itself() {
        for text in [
            "$$",
            "$(HOME)",
            "$HOME",
            "a$",
            "$$(HOME)",
            "$(",
            "",
            "ünï $ ✓",
        ] {
            assert_eq!(expand(&escape(text), home), text, "{text:?}");
        }
    }
}
