#![allow(clippy::unwrap_used)]
//! Skills, custom commands, plan mode and questions end to end: the real binary against the
//! mock server.

mod common;

use std::path::Path;

use common::{World, bash, stderr, stdout};
use dsh_testkit::MockResponse;
use serde_json::{Value, json};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A skill folder under `root` whose body says `body`.
fn skill(root: &Path, name: &str, description: &str, body: &str) {
    write(
        &root.join(name).join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
    );
}

/// The system prompt of request `n`.
fn system(w: &World, n: usize) -> String {
    w.server.requests()[n].messages()[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_model_sees_skill_descriptions_only_and_loads_a_body_with_the_skill_tool() {
    let w = World::new();
    let project_skills = w.cwd.path().join(".claude/skills");
    skill(
        &project_skills,
        "pdf",
        "Read and fill PDF forms",
        "SECRET-PDF-STEPS: use pdftk.",
    );
    skill(
        &w.home.path().join(".agents/skills"),
        "changelog",
        "Write changelog entries <like> \"this\"",
        "CHANGELOG-BODY",
    );
    w.server
        .push(MockResponse::tool_call("c1", "skill", r#"{"name":"pdf"}"#))
        .push(MockResponse::text("done"));
    let out = w.output(&["run", "fill the form"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let prompt = system(&w, 0);
    // Names and descriptions, sorted, escaped; no body, no path.
    let changelog = prompt
        .find("<skill name=\"changelog\">Write changelog entries &lt;like&gt; &quot;this&quot;</skill>")
        .unwrap_or_else(|| panic!("{prompt}"));
    let pdf = prompt
        .find("<skill name=\"pdf\">Read and fill PDF forms</skill>")
        .unwrap();
    assert!(changelog < pdf, "sorted by name");
    assert!(!prompt.contains("SECRET-PDF-STEPS") && !prompt.contains("CHANGELOG-BODY"));
    assert!(!prompt.contains(".claude/skills"), "no paths in the prefix");
    assert!(tool_names(&w.server.requests()[0].body).contains(&"skill".to_owned()));
    // The body arrives as the tool's result, with the folder for its other files.
    let loaded = &w.tool_results(1)[0];
    assert!(loaded.contains("SECRET-PDF-STEPS: use pdftk."), "{loaded}");
    let folder = project_skills.join("pdf").canonicalize().unwrap();
    assert!(
        loaded.contains(&folder.display().to_string())
            || loaded.contains(&project_skills.join("pdf").display().to_string()),
        "{loaded}"
    );
}

#[test]
fn the_prompt_prefix_stays_byte_identical_across_steps_and_turns_with_skills_present() {
    let w = World::new();
    skill(
        &w.cwd.path().join(".dsh/skills"),
        "deploy",
        "Ship a release",
        "Run the release script.",
    );
    skill(
        &w.cwd.path().join(".dsh/skills"),
        "audit",
        "Audit dependencies",
        "Run cargo audit.",
    );
    w.server
        .push(MockResponse::tool_call(
            "c1",
            "skill",
            r#"{"name":"deploy"}"#,
        ))
        .push(MockResponse::tool_call("c2", "bash", &bash("echo step")))
        .push(MockResponse::text("first answer"))
        .push(MockResponse::text("second answer"));
    let first = w.output(&["run", "ship it"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    // A skill added mid-session is picked up by the next session, never by this one.
    skill(
        &w.cwd.path().join(".dsh/skills"),
        "zzz-new",
        "Arrived later",
        "late",
    );
    let id = w.only_session_id();
    let second = w.output(&["run", "--resume", &id, "and again"]);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let requests = w.server.requests();
    assert_eq!(requests.len(), 4);
    // Every request of the first run starts with the previous one: system prompt, tools and
    // the conversation so far, byte for byte.
    for pair in requests[..3].windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert_eq!(
            serde_json::to_string(&a.body["tools"]).unwrap(),
            serde_json::to_string(&b.body["tools"]).unwrap()
        );
        let before = a.messages();
        let after = &b.messages()[..before.len()];
        assert_eq!(
            serde_json::to_string(before).unwrap(),
            serde_json::to_string(after).unwrap()
        );
    }
    assert!(system(&w, 0).contains("<skill name=\"audit\">"));
    assert!(!system(&w, 2).contains("zzz-new"));
    // The resumed session is a new session of the process: it lists the new skill.
    assert!(system(&w, 3).contains("zzz-new"));
}

#[test]
fn a_slash_task_runs_the_custom_command_with_its_arguments() {
    let w = World::new();
    write(
        &w.cwd.path().join(".claude/commands/review.md"),
        "---\ndescription: Review a file\nargument-hint: FILE FOCUS\n---\nReview $1 looking for $2.\nAll: $ARGUMENTS\n",
    );
    w.server.push(MockResponse::text("reviewed"));
    let out = w.output(&["run", "/review", "src/lib.rs", "\"error paths\""]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "reviewed\n");
    let sent = w.server.requests()[0].messages().last().unwrap()["content"].to_string();
    assert!(
        sent.contains("Review src/lib.rs looking for error paths.")
            && sent.contains("All: src/lib.rs \\\"error paths\\\""),
        "{sent}"
    );
    assert!(
        !sent.contains("$ARGUMENTS") && !sent.contains("/review"),
        "{sent}"
    );
}

#[test]
fn a_path_or_an_unknown_name_is_sent_as_it_is() {
    let w = World::new();
    w.server.push(MockResponse::text("ok"));
    let out = w.output(&["run", "/usr/bin/cc fails, why?"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let sent = w.server.requests()[0].messages().last().unwrap()["content"].to_string();
    assert!(sent.contains("/usr/bin/cc fails, why?"), "{sent}");
}

#[test]
fn a_skill_with_bad_frontmatter_is_named_at_its_line_and_the_session_runs() {
    let w = World::new();
    write(
        &w.cwd.path().join(".dsh/skills/broken/SKILL.md"),
        "---\nname: broken\ndescription: 12\n---\nbody\n",
    );
    skill(&w.cwd.path().join(".dsh/skills"), "fine", "Works", "ok");
    w.server.push(MockResponse::text("ran"));
    let out = w.output(&["run", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ran\n");
    let err = stderr(&out);
    assert!(
        err.contains("broken/SKILL.md:3: `description` must be text, not a number"),
        "{err}"
    );
    let prompt = system(&w, 0);
    assert!(prompt.contains("<skill name=\"fine\">") && !prompt.contains("broken"));
}

#[test]
fn skills_list_shows_what_applies_from_where_what_is_shadowed_and_what_was_skipped() {
    let w = World::new();
    skill(
        &w.cwd.path().join(".dsh/skills"),
        "review",
        "Project review",
        "x",
    );
    skill(&w.home.path().join("skills"), "review", "My review", "y");
    skill(
        &w.home.path().join(".claude/skills"),
        "notes",
        "Take notes",
        "z",
    );
    write(
        &w.cwd.path().join(".dsh/skills/bad/SKILL.md"),
        "---\nname: bad\n---\n",
    );
    write(&w.cwd.path().join(".dsh/commands/help.md"), "clash\n");
    write(
        &w.home.path().join("commands/standup.md"),
        "Write my standup\n",
    );
    let out = w.output(&["skills", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let ws = w.cwd.path().canonicalize().unwrap();
    for needle in [
        format!("{}/.dsh/skills (project)", ws.display()),
        format!("{}/skills (user)", w.home.path().display()),
        "review [model, /name]".to_owned(),
        "Project review".to_owned(),
        "notes [model, /name]".to_owned(),
        "/standup".to_owned(),
        "shadowed by a nearer one".to_owned(),
        "bad/SKILL.md:1: `description` is missing".to_owned(),
        "/help is a built-in command".to_owned(),
    ] {
        assert!(text.contains(&needle), "missing {needle:?} in:\n{text}");
    }
    assert!(!text.contains("My review"), "{text}");
    // `config show` names the folders.
    let shown = stdout(&w.output(&["config", "show"]));
    assert!(
        shown.contains(&format!("#   {}/.claude/skills (project)", ws.display())),
        "{shown}"
    );
    assert!(shown.contains(&format!("#   {}/.claude/commands (project)", ws.display())));
}

#[test]
fn run_plan_prints_the_plan_changes_nothing_and_exits_zero() {
    let w = World::new();
    let plan = "# Plan\n1. Add `cache.rs`.\n2. Test it.";
    let target = w.cwd.path().join("touched.txt");
    let write_args = json!({"file_path": target, "content": "x"}).to_string();
    w.server
        .push(MockResponse::tool_calls([
            (
                "c1",
                "bash",
                bash(&format!("touch {}; echo status $?", target.display())).as_str(),
            ),
            ("c2", "write", write_args.as_str()),
            ("c3", "bash", bash("echo reading works").as_str()),
        ]))
        .push(MockResponse::tool_call(
            "c4",
            "exit_plan_mode",
            &json!({ "plan": plan }).to_string(),
        ))
        .push(MockResponse::text("never asked for"));
    let out = w.output(&["run", "--plan", "add a cache"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{plan}\n"));
    assert!(!target.exists(), "nothing changed while planning");
    let results = w.tool_results(1);
    // bash ran in the read-only sandbox: the write failed inside it.
    assert!(results[0].contains("status 1"), "{results:?}");
    assert!(
        results[1].starts_with("Error: plan mode: `write` would change"),
        "{results:?}"
    );
    assert!(results[2].contains("reading works"), "{results:?}");
    assert_eq!(w.server.requests().len(), 2, "the plan ended the turn");
    let first = serde_json::to_string(w.server.requests()[0].messages()).unwrap();
    assert!(first.contains("Plan mode is on"), "{first}");
    // The plan is durable.
    let events = w.load(&w.only_session_id());
    let proposed: Vec<&Value> = events
        .iter()
        .filter_map(|e| match &e.kind {
            dsh_session::EventKind::Other { type_name, data } if type_name == "plan/proposed" => {
                Some(data)
            }
            _ => None,
        })
        .collect();
    assert_eq!(proposed[0]["plan"], plan);
}

#[test]
fn a_headless_question_is_answered_at_once_that_nobody_can_be_asked() {
    let w = World::new();
    let question = json!({"questions": [{"question": "Which store?", "options": [
        {"label": "SQLite"}, {"label": "Postgres"}
    ]}]})
    .to_string();
    w.server
        .push(MockResponse::tool_call(
            "c1",
            "ask_user_question",
            &question,
        ))
        .push(MockResponse::text("I assumed SQLite."));
    let mut child = w.spawn(&["run", "set up storage"]);
    let status = common::wait_within(&mut child, std::time::Duration::from_secs(60));
    assert_eq!(status.code(), Some(0));
    let results = w.tool_results(1);
    assert!(
        results[0].contains("no one can answer questions"),
        "{results:?}"
    );
}
