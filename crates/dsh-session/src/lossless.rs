//! Lossless JSON: the only data a durable event may carry.
//!
//! JSON numbers cannot represent `-0` distinctly once a log is read back by other
//! implementations, and non-finite numbers cannot be written at all, so both are refused before
//! anything reaches the log.

use serde_json::Value;

/// Checks that `value` survives a JSON round trip unchanged. Returns the JSON path of the first
/// offending value.
pub fn check(value: &Value) -> Result<(), String> {
    fn walk(v: &Value, path: &mut String) -> Result<(), String> {
        match v {
            Value::Number(n) => {
                if let Some(f) = n.as_f64()
                    && n.is_f64()
                    && (!f.is_finite() || (f == 0.0 && f.is_sign_negative()))
                {
                    return Err(format!("{path} is {f}, which JSON cannot carry losslessly"));
                }
                Ok(())
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    walk(item, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Object(map) => {
                for (k, item) in map {
                    let len = path.len();
                    path.push('.');
                    path.push_str(k);
                    walk(item, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    walk(value, &mut String::from("$"))
}

/// Serializes `data` to a lossless JSON value.
pub fn to_value<T: serde::Serialize + ?Sized>(data: &T) -> Result<Value, String> {
    let value = serde_json::to_value(data).map_err(|e| e.to_string())?;
    check(&value)?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn negative_zero_is_refused_with_its_path() {
        let err = check(&json!({"a": [1, {"b": -0.0}]})).unwrap_err();
        assert!(err.contains("$.a[1].b"), "{err}");
        check(&json!({"a": [0.0, 1.5, -2, "x", null]})).unwrap();
    }

    #[test]
    fn unserializable_data_is_refused() {
        let mut m = std::collections::HashMap::new();
        m.insert((1, 2), "tuple keys are not JSON");
        assert!(to_value(&m).is_err());
    }
}
