//! Canonical model-facing tool order.
//!
//! Tool order is part of the request prefix the provider caches, so it must not depend on
//! plugin mount order (INV-SP-1): it is either lexicographic or the deployment's `tool_order`.

use std::collections::{BTreeSet, HashSet};

use dsh_llm::ToolSchema;

use crate::config::TOOL_ORDER_REST;
use crate::error::PromptError;

/// Orders `tools` by `order` (listed names first or around the rest marker; unlisted names
/// lexicographically by byte order), or lexicographically when `order` is `None`. Listed names
/// that are known but not visible here are skipped; unknown names are an error.
pub(crate) fn order_tools(
    mut tools: Vec<ToolSchema>,
    order: Option<&[String]>,
    known: &BTreeSet<String>,
) -> Result<Vec<ToolSchema>, PromptError> {
    if let Some(t) = tools.iter().find(|t| t.name == TOOL_ORDER_REST) {
        return Err(PromptError::ReservedToolName {
            name: t.name.clone(),
        });
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let Some(order) = order else {
        return Ok(tools);
    };
    let unknown: Vec<String> = order
        .iter()
        .filter(|n| n.as_str() != TOOL_ORDER_REST && !known.contains(n.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(PromptError::UnknownToolInOrder {
            names: unknown,
            known: known.iter().cloned().collect(),
        });
    }
    let listed: HashSet<&str> = order.iter().map(String::as_str).collect();
    let (mut rest, mut by_name): (Vec<_>, Vec<_>) = tools
        .into_iter()
        .partition(|t| !listed.contains(t.name.as_str()));
    let mut out = Vec::with_capacity(rest.len() + by_name.len());
    let mut rest_placed = false;
    for name in order {
        if name == TOOL_ORDER_REST {
            out.append(&mut rest);
            rest_placed = true;
        } else if let Some(pos) = by_name.iter().position(|t| &t.name == name) {
            out.push(by_name.swap_remove(pos));
        }
    }
    if !rest_placed {
        out.append(&mut rest);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> ToolSchema {
        ToolSchema {
            name: name.to_owned(),
            description: String::new(),
            parameters: json!({"type": "object"}),
            needs_vision: false,
        }
    }

    fn names(tools: &[ToolSchema]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    fn known(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn rest_marker_places_unlisted_tools_where_it_stands() {
        let tools = vec![tool("mike"), tool("alpha"), tool("zulu"), tool("bravo")];
        let order = vec!["zulu".to_owned(), "*".to_owned(), "alpha".to_owned()];
        let out = order_tools(
            tools,
            Some(&order),
            &known(&["alpha", "bravo", "mike", "zulu"]),
        )
        .unwrap();
        assert_eq!(names(&out), ["zulu", "bravo", "mike", "alpha"]);
    }

    #[test]
    fn without_rest_marker_unlisted_tools_follow_the_listed_ones() {
        let tools = vec![tool("mike"), tool("alpha"), tool("zulu")];
        let order = vec!["zulu".to_owned()];
        let out = order_tools(tools, Some(&order), &known(&["alpha", "mike", "zulu"])).unwrap();
        assert_eq!(names(&out), ["zulu", "alpha", "mike"]);
    }

    #[test]
    fn known_but_hidden_listed_tools_are_skipped() {
        let tools = vec![tool("alpha")];
        let order = vec!["zulu".to_owned(), "*".to_owned()];
        let out = order_tools(tools, Some(&order), &known(&["alpha", "zulu"])).unwrap();
        assert_eq!(names(&out), ["alpha"]);
    }

    #[test]
    fn a_source_may_not_use_the_rest_marker_as_a_name() {
        let err = order_tools(vec![tool("*")], None, &known(&["*"])).unwrap_err();
        assert!(matches!(err, PromptError::ReservedToolName { .. }));
    }
}
