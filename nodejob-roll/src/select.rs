//! Which nodes a plan selects: [`select_nodes`] (no node selected is an error, said before the
//! Lease) and [`check_selection`], the plan's rules for a selector and node names.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use nodejob_core::selector::LabelSelector;
use nodejob_core::{ApiError, NodeApi, is_dns1123_subdomain};

use crate::call::retry;
use crate::placement::PlanError;

/// Why [`select_nodes`] found no answer. The plan's fields it names are in backticks, for a
/// front end to name them its way (a flag, an argument).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Selecting {
    /// The plan selects no node at all: a selector that matches none (a typo, most often), or
    /// none of the named nodes there. Said before the Lease, so it never looks like a roll
    /// that finished.
    #[error("the plan selects no node: {}", none_selected(selector.as_deref(), nodes))]
    NoneSelected {
        /// The selector, if any.
        selector: Option<String>,
        /// The nodes named, if any.
        nodes: Vec<String>,
    },
    /// A named node does not exist (or does not match the selector).
    #[error("node {node} does not exist{}; check `nodes`", match selector {
        Some(s) => format!(" or does not match the selector {s:?}"),
        None => String::new(),
    })]
    NotFound {
        /// The node.
        node: String,
        /// The selector, if any.
        selector: Option<String>,
    },
    /// The nodes could not be listed.
    #[error("listing nodes (selector {selector:?}): {cause}")]
    Listing {
        /// The selector.
        selector: String,
        /// Why.
        cause: ApiError,
    },
}

fn none_selected(selector: Option<&str>, nodes: &[String]) -> String {
    match (selector, nodes) {
        (None, []) => "the cluster has no node".into(),
        (Some(s), []) => format!("the selector {s:?} matches no node; check `selector`"),
        (None, names) => format!(
            "none of the nodes {} exists; check `nodes`",
            names.join(", ")
        ),
        (Some(s), names) => format!(
            "none of the nodes {} exists and matches the selector {s:?}; check `nodes` and \
             `selector`",
            names.join(", ")
        ),
    }
}

/// The nodes a plan names: those `selector` matches (every node when `None`), narrowed to
/// `names`, in that order, when some are named.
///
/// # Errors
/// [`Selecting::NoneSelected`] when that is no node at all; [`Selecting::NotFound`] when some
/// named node is there and another is not; [`Selecting::Listing`] when the nodes cannot be
/// listed.
pub async fn select_nodes<A: NodeApi + ?Sized>(
    api: &A,
    selector: Option<&str>,
    names: &[String],
) -> std::result::Result<Vec<Node>, Selecting> {
    let label_selector = selector.unwrap_or_default();
    let listed = retry(api, || api.list_nodes(label_selector))
        .await
        .map_err(|cause| Selecting::Listing {
            selector: label_selector.to_string(),
            cause,
        })?;
    pick(listed, selector, names)
}

/// [`select_nodes`] over nodes already read (a [`NodeView`](crate::NodeView)'s): those
/// `selector` matches among `nodes`, narrowed to `names` when some are named.
///
/// # Errors
/// As [`select_nodes`], but for the listing: a selector that does not parse (a plan checked by
/// [`check_selection`] has none) selects nothing, [`Selecting::NoneSelected`].
pub fn select_from<'n>(
    nodes: impl IntoIterator<Item = &'n Node>,
    selector: Option<&str>,
    names: &[String],
) -> std::result::Result<Vec<Node>, Selecting> {
    let parsed = selector.map(LabelSelector::parse).transpose();
    let matching: Vec<Node> = match &parsed {
        Ok(parsed) => nodes
            .into_iter()
            .filter(|n| {
                parsed
                    .as_ref()
                    .is_none_or(|s| s.matches(n.metadata.labels.as_ref()))
            })
            .cloned()
            .collect(),
        Err(_) => Vec::new(),
    };
    pick(matching, selector, names)
}

/// A plan's `selector` and `nodes`, the selector parsed once: whether the plan selects a node,
/// asked of one node at a time (the admission of each batch asks it of the nodes that changed
/// only).
#[derive(Clone, Debug)]
pub struct Selection {
    /// `None`: every node; `Some(None)`: a selector that does not parse, which selects none
    /// (a plan checked by [`check_selection`] has none).
    selector: Option<Option<LabelSelector>>,
    names: BTreeSet<String>,
}

impl Selection {
    /// The nodes `selector` matches (every node when `None`), narrowed to `names` when some
    /// are named.
    pub fn new(selector: Option<&str>, names: &[String]) -> Self {
        Selection {
            selector: selector.map(|s| LabelSelector::parse(s).ok()),
            names: names.iter().cloned().collect(),
        }
    }

    /// Whether the plan selects `node`.
    pub fn selects(&self, node: &Node) -> bool {
        let named = self.names.is_empty()
            || (node.metadata.name.as_ref()).is_some_and(|n| self.names.contains(n));
        let matched = match &self.selector {
            None => true,
            Some(None) => false,
            Some(Some(selector)) => selector.matches(node.metadata.labels.as_ref()),
        };
        named && matched
    }
}

/// The nodes of `listed` (those the selector matched) that a plan naming `names` selects.
fn pick(
    listed: Vec<Node>,
    selector: Option<&str>,
    names: &[String],
) -> std::result::Result<Vec<Node>, Selecting> {
    let name_of = |n: &Node| n.metadata.name.clone().unwrap_or_default();
    let none_selected = || Selecting::NoneSelected {
        selector: selector.map(str::to_string),
        nodes: names.to_vec(),
    };
    if names.is_empty() {
        return match listed.is_empty() {
            true => Err(none_selected()),
            false => Ok(listed),
        };
    }
    if !names
        .iter()
        .any(|want| listed.iter().any(|n| &name_of(n) == want))
    {
        return Err(none_selected());
    }
    names
        .iter()
        .map(|want| {
            listed
                .iter()
                .find(|n| &name_of(n) == want)
                .cloned()
                .ok_or_else(|| Selecting::NotFound {
                    node: want.clone(),
                    selector: selector.map(str::to_string),
                })
        })
        .collect()
}

/// Checks a plan's `selector` and `nodes`, before any API call: the selector, when given,
/// parses by the apiserver's grammar ([`nodejob_core::selector`]) and is not blank (leave it unset to
/// select every node); each node name is a DNS-1123 subdomain, and none is named twice.
///
/// # Errors
/// A [`PlanError`] on `selector` or `nodes`, naming the value and the rule.
pub fn check_selection(
    selector: Option<&str>,
    nodes: &[String],
) -> std::result::Result<(), PlanError> {
    if let Some(sel) = selector {
        if sel.trim().is_empty() {
            return Err(PlanError::new(
                "selector",
                format!(
                    "{sel:?} is blank: give a label selector such as `role=worker,zone`, or \
                     none to select every node"
                ),
            ));
        }
        if let Err(e) = LabelSelector::parse(sel) {
            return Err(PlanError::new(
                "selector",
                format!(
                    "{sel:?} is not a label selector (such as `role=worker,zone in (a,b)`): {e}"
                ),
            ));
        }
    }
    for node in nodes {
        if !is_dns1123_subdomain(node) {
            return Err(PlanError::new(
                "nodes",
                format!("{node:?} is not a node name (a lowercase DNS-1123 subdomain)"),
            ));
        }
    }
    let mut twice: Vec<&str> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        if nodes[..i].contains(node) && !twice.contains(&node.as_str()) {
            twice.push(node);
        }
    }
    if !twice.is_empty() {
        return Err(PlanError::new(
            "nodes",
            format!("{} named more than once", twice.join(", ")),
        ));
    }
    Ok(())
}
