//! A server's input schema, made acceptable to providers.
//!
//! MCP servers publish JSON Schemas of every dialect and quality; providers are strict about
//! function parameters: the root must be an object schema with `properties`, and some reject
//! meta keys or sub-schemas without a `type`. One tool with a schema the provider refuses
//! fails every request of the session, so the schema is normalised once when the tool is
//! listed: the meta keys `$schema` and `$id` go, a root that is not an object schema becomes an
//! empty object schema (no parameters beats a request the provider refuses), boolean
//! sub-schemas become `{}`, and an untyped sub-schema with `properties` or `items` gets the type those
//! imply.

use serde_json::{Map, Value};

/// The provider-acceptable form of `schema`.
pub fn normalize(schema: &Value) -> Value {
    let mut root = match schema {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    root.remove("$schema");
    root.remove("$id");
    match root.get("type") {
        None => {
            root.insert("type".to_owned(), Value::from("object"));
        }
        Some(Value::String(t)) if t == "object" => {}
        // A root that is not an object cannot be function parameters: offer no parameters
        // rather than a schema the provider rejects.
        Some(_) => {
            root = Map::new();
            root.insert("type".to_owned(), Value::from("object"));
        }
    }
    if !matches!(root.get("properties"), Some(Value::Object(_))) {
        root.insert("properties".to_owned(), Value::Object(Map::new()));
    }
    let mut value = Value::Object(root);
    walk(&mut value, true);
    value
}

/// Normalises sub-schemas in place.
fn walk(value: &mut Value, is_root: bool) {
    let Value::Object(map) = value else {
        return;
    };
    if !is_root && !map.contains_key("type") {
        if map.contains_key("properties") {
            map.insert("type".to_owned(), Value::from("object"));
        } else if map.contains_key("items") {
            map.insert("type".to_owned(), Value::from("array"));
        }
    }
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            for child in children.values_mut() {
                sub_schema(child);
            }
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(child) = map.get_mut(key) {
            match child {
                // `additionalProperties: false` is meaningful; keep booleans there.
                Value::Bool(_) if key == "additionalProperties" => {}
                Value::Array(items) => items.iter_mut().for_each(sub_schema),
                _ => sub_schema(child),
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().for_each(sub_schema);
        }
    }
}

fn sub_schema(value: &mut Value) {
    if let Value::Bool(_) = value {
        *value = Value::Object(Map::new());
    }
    walk(value, false);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_missing_or_foreign_root_becomes_an_object_schema() {
        assert_eq!(
            normalize(&json!({})),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            normalize(&json!({"type": "string"})),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            normalize(&Value::Null),
            json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn meta_keys_go_and_untyped_children_get_their_implied_type() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "opts": {"properties": {"deep": true}},
                "list": {"items": {"type": "string"}},
                "any": true
            },
            "additionalProperties": false,
            "required": ["opts"]
        });
        assert_eq!(
            normalize(&schema),
            json!({
                "type": "object",
                "properties": {
                    "opts": {"type": "object", "properties": {"deep": {}}},
                    "list": {"type": "array", "items": {"type": "string"}},
                    "any": {}
                },
                "additionalProperties": false,
                "required": ["opts"]
            })
        );
    }
}
