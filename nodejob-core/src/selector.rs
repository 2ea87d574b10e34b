//! Label selectors in their string form (`LIST ?labelSelector=`, `kubectl -l`), parsed and
//! matched as the apiserver does (`Parse` in `k8s.io/apimachinery/pkg/labels/selector.go`), so
//! a plan refuses before any API call exactly the selectors the apiserver would refuse, and the
//! fake matches what the apiserver matches.
//!
//! The grammar: requirements joined by `,`, each one of
//!
//! | form | holds when the labels… |
//! |---|---|
//! | `k` | have `k` |
//! | `!k` | lack `k` |
//! | `k=v`, `k==v` | have `k` with value `v` |
//! | `k!=v` | lack `k`, or have it with another value |
//! | `k in (a,b)` | have `k` with one of the values |
//! | `k notin (a,b)` | lack `k`, or have it with none of the values |
//! | `k>n`, `k<n` | have `k` with an integer value greater (less) than `n` |
//!
//! Keys are qualified names (an optional DNS-1123 subdomain prefix and `/`, then a name of at
//! most 63 characters); values are label values (at most 63 characters, alphanumeric at the
//! ends, `-`, `_` or `.` inside, or empty). Spaces, tabs and line ends separate tokens; `in`
//! and `notin` are keywords only where an operator may stand (`in in (in)` is valid). The empty
//! selector matches everything.
//!
//! ```
//! # use std::collections::BTreeMap;
//! # use nodejob_core::selector::LabelSelector;
//! let selector: LabelSelector = "role in (worker,infra),!node-role.kubernetes.io/control-plane"
//!     .parse()
//!     .unwrap();
//! let labels = BTreeMap::from([("role".to_string(), "worker".to_string())]);
//! assert!(selector.matches(Some(&labels)));
//! assert!("role=a=b".parse::<LabelSelector>().is_err());
//! ```

use std::collections::BTreeMap;
use std::fmt;

use crate::names::{is_label_value, is_qualified_name};

/// A parsed label selector: every requirement must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// One requirement of a [`LabelSelector`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the key and the values relate.
    pub operator: Operator,
    /// The values: one for `=`, `!=`, `>`, `<`; at least one for `in`, `notin` (an empty
    /// value among them); none for exists and does-not-exist.
    pub values: Vec<String>,
}

/// The operator of a [`Requirement`] (`selection.Operator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operator {
    /// `k`.
    Exists,
    /// `!k`.
    DoesNotExist,
    /// `k=v` or `k==v`.
    Equals,
    /// `k!=v`.
    NotEquals,
    /// `k in (…)`.
    In,
    /// `k notin (…)`.
    NotIn,
    /// `k>n`.
    GreaterThan,
    /// `k<n`.
    LessThan,
}

/// Why a selector does not parse: the apiserver's reason, in its words where it has some
/// (`found ',', expected: identifier`). Displayed without the selector itself: the caller
/// names it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(String);

impl LabelSelector {
    /// Parses `selector` by the apiserver's grammar (see the module docs).
    ///
    /// # Errors
    /// [`SelectorError`] for anything the apiserver's `labels.Parse` refuses. A selector with
    /// a NUL byte is refused too (the apiserver's lexer takes NUL for the end of the string and
    /// ignores what follows: never what a caller meant).
    pub fn parse(selector: &str) -> Result<LabelSelector, SelectorError> {
        if selector.contains('\0') {
            return Err(SelectorError("a selector may not hold a NUL byte".into()));
        }
        let tokens = lex(selector);
        Parser { tokens, at: 0 }.selector()
    }

    /// Whether `labels` (none: no labels) satisfy every requirement
    /// (`Requirement.Matches` in selector.go).
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether it has no requirement: it matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, in the order written.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, SelectorError> {
        LabelSelector::parse(s)
    }
}

impl Requirement {
    /// Whether `labels` satisfy it.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let value = labels.and_then(|l| l.get(&self.key));
        let listed = |v: &String| self.values.contains(v);
        match self.operator {
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Equals | Operator::In => value.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(listed),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(have), Some(bound)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                match self.operator {
                    Operator::GreaterThan => have > bound,
                    _ => have < bound,
                }
            }
        }
    }
}

/// A token of the selector's lexer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// A key, a value, or a word where one was expected.
    Word(String),
    /// `in`, `notin`: operators after a key, words elsewhere.
    In,
    NotIn,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    Open,
    Close,
    Comma,
    End,
}

impl Token {
    /// The token as the apiserver's messages quote it (`found ',', …`).
    fn literal(&self) -> &str {
        match self {
            Token::Word(w) => w,
            Token::In => "in",
            Token::NotIn => "notin",
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::GreaterThan => ">",
            Token::LessThan => "<",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
            Token::End => "",
        }
    }

    /// Where a value may stand, `in` and `notin` are words.
    fn as_value(&self) -> Token {
        match self {
            Token::In => Token::Word("in".into()),
            Token::NotIn => Token::Word("notin".into()),
            other => other.clone(),
        }
    }
}

/// The bytes that end a word and start an operator (`isSpecialSymbol`).
fn is_symbol(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The bytes that separate tokens (`isWhitespace`).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// The tokens of `s`, ending with [`Token::End`]. Operators are read greedily, as the
/// apiserver's lexer does: `==` and `!=` are one token, any other run of symbols one token a
/// symbol (`=(` is `=` then `(`).
fn lex(s: &str) -> Vec<Token> {
    let bytes = s.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && is_space(bytes[i]) {
            i += 1;
        }
        let Some(&b) = bytes.get(i) else {
            tokens.push(Token::End);
            return tokens;
        };
        if is_symbol(b) {
            let double = bytes.get(i + 1) == Some(&b'=') && matches!(b, b'=' | b'!');
            tokens.push(match (b, double) {
                (b'=', true) => Token::DoubleEquals,
                (b'!', true) => Token::NotEquals,
                (b'=', _) => Token::Equals,
                (b'!', _) => Token::Not,
                (b'(', _) => Token::Open,
                (b')', _) => Token::Close,
                (b',', _) => Token::Comma,
                (b'>', _) => Token::GreaterThan,
                _ => Token::LessThan,
            });
            i += if double { 2 } else { 1 };
            continue;
        }
        let start = i;
        while i < bytes.len() && !is_symbol(bytes[i]) && !is_space(bytes[i]) {
            i += 1;
        }
        // Words end only at ASCII bytes, so `start..i` falls on character boundaries.
        tokens.push(match &s[start..i] {
            "in" => Token::In,
            "notin" => Token::NotIn,
            word => Token::Word(word.to_string()),
        });
    }
}

/// A recursive-descent parser over the tokens, following `Parser.parse` in selector.go.
struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

fn found(token: &Token, expected: &str) -> SelectorError {
    SelectorError(format!("found '{}', expected: {expected}", token.literal()))
}

impl Parser {
    fn peek(&self) -> &Token {
        // The lexer always ends with End, and nothing is read past it.
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let token = self.peek().clone();
        self.at += 1;
        token
    }

    /// `requirement ("," requirement)*`, or nothing.
    fn selector(&mut self) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            match self.peek().as_value() {
                Token::Word(_) | Token::Not => {}
                Token::End => return Ok(LabelSelector { requirements }),
                other => return Err(found(&other, "!, identifier, or 'end of string'")),
            }
            let requirement = self
                .requirement()
                .map_err(|e| SelectorError(format!("unable to parse requirement: {}", e.0)))?;
            requirements.push(requirement);
            match self.next().as_value() {
                Token::End => return Ok(LabelSelector { requirements }),
                Token::Comma => match self.peek().as_value() {
                    Token::Word(_) | Token::Not => {}
                    other => return Err(found(&other, "identifier after ','")),
                },
                other => return Err(found(&other, "',' or 'end of string'")),
            }
        }
    }

    /// `[!] key [operator values]`.
    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let mut token = self.next().as_value();
        let negated = token == Token::Not;
        if negated {
            token = self.next().as_value();
        }
        let Token::Word(key) = token else {
            return Err(found(&token, "identifier"));
        };
        check_key(&key)?;
        // `!k` takes no operator: what follows must end the requirement, which the caller
        // checks (`!a=b` is refused there, at the `=`).
        let ends = matches!(self.peek(), Token::End | Token::Comma);
        if negated || ends {
            let operator = match negated {
                true => Operator::DoesNotExist,
                false => Operator::Exists,
            };
            return Ok(Requirement {
                key,
                operator,
                values: Vec::new(),
            });
        }
        let operator = match self.next() {
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Equals | Token::DoubleEquals => Operator::Equals,
            Token::NotEquals => Operator::NotEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            other => return Err(found(&other, "in, notin, =, ==, !=, gt, lt")),
        };
        let values = match operator {
            Operator::In | Operator::NotIn => self.set()?,
            _ => vec![self.exact()?],
        };
        for value in &values {
            if !is_label_value(value) {
                return Err(SelectorError(format!(
                    "values[{key}]: Invalid value: {value:?}: a valid label value must be an \
                     empty string or at most 63 characters, beginning and ending with an \
                     alphanumeric character, with '-', '_', '.' or alphanumerics between"
                )));
            }
        }
        if matches!(operator, Operator::GreaterThan | Operator::LessThan)
            && values[0].parse::<i64>().is_err()
        {
            return Err(SelectorError(format!(
                "values[0]: Invalid value: {:?}: for 'Gt', 'Lt' operators, the value must be an \
                 integer",
                values[0]
            )));
        }
        Ok(Requirement {
            key,
            operator,
            values,
        })
    }

    /// The one value after `=`, `==`, `!=`, `>`, `<`: empty when the requirement ends there.
    fn exact(&mut self) -> Result<String, SelectorError> {
        if matches!(self.peek(), Token::End | Token::Comma) {
            return Ok(String::new());
        }
        match self.next().as_value() {
            Token::Word(value) => Ok(value),
            other => Err(found(&other, "identifier")),
        }
    }

    /// `( v, … )`: empty values where two commas, a comma and a parenthesis, or the two
    /// parentheses meet (`()` is the one empty value).
    fn set(&mut self) -> Result<Vec<String>, SelectorError> {
        let open = self.next().as_value();
        if open != Token::Open {
            return Err(SelectorError(format!(
                "found '{}' expected: '('",
                open.literal()
            )));
        }
        let mut values: Vec<String> = Vec::new();
        let insert = |values: &mut Vec<String>, v: String| {
            if !values.contains(&v) {
                values.push(v);
            }
        };
        match self.peek().as_value() {
            Token::Close => {
                self.next();
                return Ok(vec![String::new()]);
            }
            Token::Word(_) | Token::Comma => {}
            other => return Err(found(&other, "',', ')' or identifier")),
        }
        // A value is expected where the list starts and after each comma.
        let mut expecting = true;
        loop {
            match self.next().as_value() {
                Token::Word(value) if expecting => {
                    insert(&mut values, value);
                    expecting = false;
                    match self.peek().as_value() {
                        Token::Comma | Token::Close => {}
                        other => return Err(found(&other, "',' or ')'")),
                    }
                }
                Token::Comma => {
                    if expecting {
                        insert(&mut values, String::new());
                    }
                    expecting = true;
                }
                Token::Close if !expecting || !values.is_empty() => {
                    if expecting {
                        insert(&mut values, String::new());
                    }
                    return Ok(values);
                }
                other => return Err(found(&other, "',', or identifier")),
            }
        }
    }
}

/// A key is a qualified name (`validateLabelKey`: `IsQualifiedName`).
fn check_key(key: &str) -> Result<(), SelectorError> {
    if is_qualified_name(key) {
        return Ok(());
    }
    Err(SelectorError(format!(
        "key: Invalid value: {key:?}: a label key is a name of at most 63 characters, \
         beginning and ending with an alphanumeric character, with '-', '_', '.' or \
         alphanumerics between, with an optional DNS-1123 subdomain prefix and '/' \
         (e.g. 'example.com/MyName')"
    )))
}

impl fmt::Display for LabelSelector {
    /// The requirements as written, normalised (`k=v`, `k in (a,b)`), comma-joined.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let values = r.values.join(",");
            match r.operator {
                Operator::Exists => write!(f, "{}", r.key)?,
                Operator::DoesNotExist => write!(f, "!{}", r.key)?,
                Operator::Equals => write!(f, "{}={values}", r.key)?,
                Operator::NotEquals => write!(f, "{}!={values}", r.key)?,
                Operator::In => write!(f, "{} in ({values})", r.key)?,
                Operator::NotIn => write!(f, "{} notin ({values})", r.key)?,
                Operator::GreaterThan => write!(f, "{}>{values}", r.key)?,
                Operator::LessThan => write!(f, "{}<{values}", r.key)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Selectors the apiserver accepts (`TestSelectorParse` and `TestLexerParser` in
    /// selector_test.go, and `kubectl get nodes -l` on a v1.33 apiserver), with the
    /// requirements it reads, normalised.
    #[test]
    fn the_apiserver_accepts_these() -> Result<(), SelectorError> {
        let table = [
            ("", ""),
            ("   ", ""),
            ("x", "x"),
            ("!x", "!x"),
            ("! x", "!x"),
            ("x=a", "x=a"),
            ("x==a", "x=a"),
            ("x = a", "x=a"),
            ("x!=a", "x!=a"),
            ("x=", "x="),
            ("x=,y", "x=,y"),
            ("x>1", "x>1"),
            ("x<12", "x<12"),
            ("a=b,c,!d", "a=b,c,!d"),
            ("x in (a,b)", "x in (a,b)"),
            ("x in(a,b)", "x in (a,b)"),
            ("x notin (a)", "x notin (a)"),
            ("x in (a, b ,c)", "x in (a,b,c)"),
            ("x in ()", "x in ()"),
            ("x in (,)", "x in ()"),
            ("x in (a,)", "x in (a,)"),
            ("x in (,a)", "x in (,a)"),
            ("x in (a,a)", "x in (a)"),
            (
                "x in (foo,,baz),y,z notin ()",
                "x in (foo,,baz),y,z notin ()",
            ),
            ("in in (in)", "in in (in)"),
            ("notin notin (notin)", "notin notin (notin)"),
            ("x=in", "x=in"),
            ("x=a,in", "x=a,in"),
            (
                "node-role.kubernetes.io/control-plane",
                "node-role.kubernetes.io/control-plane",
            ),
            (
                "!node-role.kubernetes.io/control-plane",
                "!node-role.kubernetes.io/control-plane",
            ),
            (
                "topology.kubernetes.io/zone in (eu-1a,eu-1b)",
                "topology.kubernetes.io/zone in (eu-1a,eu-1b)",
            ),
            ("Upper_Case.key=Value_1", "Upper_Case.key=Value_1"),
            ("x\t=\ta\n,\ry", "x=a,y"),
        ];
        for (selector, normalised) in table {
            let parsed = LabelSelector::parse(selector)
                .map_err(|e| SelectorError(format!("{selector:?}: {e}")))?;
            assert_eq!(parsed.to_string(), normalised, "{selector:?}");
        }
        Ok(())
    }

    /// Selectors the apiserver refuses (400 `unable to parse requirement` and the like), each
    /// with what its message says.
    #[test]
    fn the_apiserver_refuses_these() {
        let long = "a".repeat(64);
        let long_key = format!("{long}=b");
        let long_value = format!("a={long}");
        let table: Vec<(&str, &str)> = vec![
            (
                "=worker",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            ("role=a=b", "found '=', expected: ',' or 'end of string'"),
            ("role=(x)", "found '(', expected: identifier"),
            ("!", "found '', expected: identifier"),
            ("!!x", "found '!', expected: identifier"),
            ("!x=a", "found '=', expected: ',' or 'end of string'"),
            (
                ",",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            ("x,", "found '', expected: identifier after ','"),
            ("x,,y", "found ',', expected: identifier after ','"),
            ("x y", "found 'y', expected: in, notin, =, ==, !=, gt, lt"),
            ("x=a b", "found 'b', expected: ',' or 'end of string'"),
            ("x in", "found '' expected: '('"),
            ("x in a", "found 'a' expected: '('"),
            ("x in (", "found '', expected: ',', ')' or identifier"),
            ("x in (a", "found '', expected: ',' or ')'"),
            ("x in (a b)", "found 'b', expected: ',' or ')'"),
            ("x in (a,", "found '', expected: ',', or identifier"),
            ("x in ((a)", "found '(', expected: ',', ')' or identifier"),
            ("x notin", "found '' expected: '('"),
            ("x in (a),y in", "found '' expected: '('"),
            ("x>", "the value must be an integer"),
            ("x>a", "the value must be an integer"),
            ("x>-1", "a valid label value"),
            ("x>99999999999999999999", "the value must be an integer"),
            ("x>=1", "found '=', expected: identifier"),
            ("x===a", "found '=', expected: identifier"),
            ("x=a!", "found '!', expected: ',' or 'end of string'"),
            ("Bad/Key", "key: Invalid value"),
            ("/key", "key: Invalid value"),
            ("a/b/c", "key: Invalid value"),
            ("-x", "key: Invalid value"),
            ("x.", "key: Invalid value"),
            ("x=-a", "a valid label value"),
            ("x=a.", "a valid label value"),
            ("x in (a,-b)", "a valid label value"),
            ("x=é", "a valid label value"),
            (&long_key, "key: Invalid value"),
            (&long_value, "a valid label value"),
            ("a\0b", "NUL"),
        ];
        for (selector, says) in table {
            match LabelSelector::parse(selector) {
                Ok(parsed) => panic!("{selector:?} parsed as {parsed:?}"),
                Err(e) => assert!(e.to_string().contains(says), "{selector:?}: {e}"),
            }
        }
    }

    /// Matching, as `Requirement.Matches` answers it.
    #[test]
    fn requirements_match_as_the_apiserver_matches() -> Result<(), SelectorError> {
        let node = labels(&[("role", "worker"), ("zone", "a"), ("rank", "7")]);
        let table = [
            ("", true),
            ("role", true),
            ("!role", false),
            ("gpu", false),
            ("!gpu", true),
            ("role=worker", true),
            ("role==infra", false),
            ("role!=infra", true),
            ("role!=worker", false),
            ("gpu!=yes", true),
            ("role in (infra,worker)", true),
            ("role in (infra)", false),
            ("gpu in (yes)", false),
            ("role notin (infra)", true),
            ("role notin (worker)", false),
            ("gpu notin (yes)", true),
            ("rank>6", true),
            ("rank>7", false),
            ("rank<8", true),
            ("role>1", false),
            ("gpu<1", false),
            ("gpu=", false),
            ("role=worker,zone in (a,b),!gpu", true),
            ("role=worker,zone=b", false),
        ];
        for (selector, want) in table {
            let parsed = LabelSelector::parse(selector)?;
            assert_eq!(parsed.matches(Some(&node)), want, "{selector:?}");
        }
        let unlabelled = LabelSelector::parse("!role,gpu notin (yes),x!=y")?;
        assert!(unlabelled.matches(None));
        assert!(!LabelSelector::parse("role")?.matches(None));
        let empty_value = labels(&[("gpu", "")]);
        assert!(LabelSelector::parse("gpu=")?.matches(Some(&empty_value)));
        assert!(LabelSelector::parse("gpu in ()")?.matches(Some(&empty_value)));
        Ok(())
    }
}
