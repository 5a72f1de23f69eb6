//! Unified diffs of one file between two checkpoints.

use gix::objs::tree::EntryKind;

use crate::path::display;

/// The diff of `path` from `old` to `new` (kind and content; `None` = absent).
pub fn unified(
    path: &[u8],
    old: Option<(EntryKind, Vec<u8>)>,
    new: Option<(EntryKind, Vec<u8>)>,
) -> String {
    let name = display(path);
    let text = |side: &Option<(EntryKind, Vec<u8>)>| -> Option<String> {
        match side {
            None => Some(String::new()),
            Some((EntryKind::Tree, _)) => Some(String::new()),
            Some((_, bytes)) if bytes.contains(&0) => None,
            Some((_, bytes)) => String::from_utf8(bytes.clone()).ok(),
        }
    };
    let mode = |side: &Option<(EntryKind, Vec<u8>)>| side.as_ref().map(|(k, _)| *k);
    let mut out = String::new();
    match (mode(&old), mode(&new)) {
        (None, Some(EntryKind::Tree)) => return format!("new empty directory {name}/\n"),
        (Some(EntryKind::Tree), None) => return format!("removed empty directory {name}/\n"),
        (Some(a), Some(b)) if a != b => {
            out.push_str(&format!(
                "mode {} -> {}\n",
                a.as_octal_str(),
                b.as_octal_str()
            ));
        }
        _ => {}
    }
    let (Some(a), Some(b)) = (text(&old), text(&new)) else {
        out.push_str(&format!("binary file {name} differs\n"));
        return out;
    };
    if a == b {
        return out;
    }
    let (from, to) = (
        if old.is_some() {
            format!("a/{name}")
        } else {
            "/dev/null".to_owned()
        },
        if new.is_some() {
            format!("b/{name}")
        } else {
            "/dev/null".to_owned()
        },
    );
    out.push_str(
        &similar::TextDiff::from_lines(&a, &b)
            .unified_diff()
            .context_radius(3)
            .header(&from, &to)
            .to_string(),
    );
    out
}
