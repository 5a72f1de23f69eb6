//! Discovery of skills and commands on real folders: the six skill roots and three command
//! roots, nearest-wins clashes, files skipped with their line, built-in names refused, and
//! files that are not regular files never hanging discovery.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use dsh_skills::{Catalog, Kind, Places, Scope};

/// A project (a repository) and a person's folders, all under one temp dir.
struct World {
    _dir: tempfile::TempDir,
    project: PathBuf,
    dsh_home: PathBuf,
    home: PathBuf,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join(".git")).unwrap();
        let dsh_home = dir.path().join("dsh-home");
        let home = dir.path().join("home");
        Self {
            project,
            dsh_home,
            home,
            _dir: dir,
        }
    }

    fn places(&self) -> Places {
        Places::for_workspace(&self.project, &self.dsh_home, Some(self.home.clone()))
    }

    fn catalog(&self) -> Catalog {
        Catalog::discover(&self.places())
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn skill(root: &Path, name: &str, description: &str) -> PathBuf {
    let file = root.join(name).join("SKILL.md");
    write(
        &file,
        &format!(
            "---\nname: {name}\ndescription: {description}\n---\n# {name}\nDo the {name} thing.\n"
        ),
    );
    file
}

#[test]
fn skills_are_found_in_all_six_roots_and_listed_by_name() {
    let w = World::new();
    skill(&w.project.join(".dsh/skills"), "a-dsh", "from .dsh");
    skill(
        &w.project.join(".agents/skills"),
        "b-agents",
        "from .agents",
    );
    skill(
        &w.project.join(".claude/skills"),
        "c-claude",
        "from .claude",
    );
    skill(&w.dsh_home.join("skills"), "d-home", "from DSH_HOME");
    skill(
        &w.home.join(".agents/skills"),
        "e-user-agents",
        "from ~/.agents",
    );
    skill(
        &w.home.join(".claude/skills"),
        "f-user-claude",
        "from ~/.claude",
    );
    let catalog = w.catalog();
    let found: Vec<(&str, Scope)> = catalog
        .skills()
        .iter()
        .map(|s| (s.name.as_str(), s.root.scope))
        .collect();
    assert_eq!(
        found,
        [
            ("a-dsh", Scope::Project),
            ("b-agents", Scope::Project),
            ("c-claude", Scope::Project),
            ("d-home", Scope::User),
            ("e-user-agents", Scope::User),
            ("f-user-claude", Scope::User),
        ]
    );
    assert!(catalog.problems().is_empty(), "{:?}", catalog.problems());
}

#[test]
fn the_nearest_root_wins_a_name_and_the_loser_is_listed_as_shadowed() {
    let w = World::new();
    let near = skill(
        &w.project.join(".claude/skills"),
        "review",
        "the project's review",
    );
    let far = skill(&w.home.join(".claude/skills"), "review", "my own review");
    let nearest = skill(&w.project.join(".dsh/skills"), "deploy", "dsh's own");
    let shadowed_by_nearest = skill(&w.project.join(".agents/skills"), "deploy", "cross-vendor");
    let catalog = w.catalog();
    assert_eq!(catalog.skills().len(), 2);
    let review = catalog
        .skills()
        .iter()
        .find(|s| s.name == "review")
        .unwrap();
    assert_eq!(review.file, near);
    assert_eq!(review.description, "the project's review");
    let deploy = catalog
        .skills()
        .iter()
        .find(|s| s.name == "deploy")
        .unwrap();
    assert_eq!(deploy.file, nearest);
    let shadowed: Vec<(&Path, &Path)> = catalog
        .shadowed()
        .iter()
        .map(|s| (s.file.as_path(), s.by.as_path()))
        .collect();
    assert!(
        shadowed.contains(&(far.as_path(), near.as_path())),
        "{shadowed:?}"
    );
    assert!(
        shadowed.contains(&(shadowed_by_nearest.as_path(), nearest.as_path())),
        "{shadowed:?}"
    );
}

#[test]
fn a_skill_with_bad_frontmatter_is_skipped_and_named_at_its_line_and_the_rest_load() {
    let w = World::new();
    let root = w.project.join(".dsh/skills");
    skill(&root, "good", "works");
    let bad = root.join("broken/SKILL.md");
    write(
        &bad,
        "---\nname: broken\ndescription: [unclosed\n---\nbody\n",
    );
    let missing = root.join("quiet/SKILL.md");
    write(&missing, "---\nname: quiet\n---\nbody\n");
    let misnamed = root.join("folder/SKILL.md");
    write(&misnamed, "---\nname: other\ndescription: x\n---\n");
    let catalog = w.catalog();
    let names: Vec<&str> = catalog.skills().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    let problems: Vec<String> = catalog.problems().iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 3, "{problems:?}");
    let at = |file: &Path| {
        problems
            .iter()
            .find(|p| p.starts_with(&file.display().to_string()))
            .unwrap_or_else(|| panic!("{} not named in {problems:?}", file.display()))
            .clone()
    };
    // The parser notices the unclosed list where the frontmatter ends.
    assert!(
        at(&bad).contains("SKILL.md:4: the frontmatter is not valid YAML"),
        "{}",
        at(&bad)
    );
    assert!(
        at(&missing).contains(":1: `description` is missing"),
        "{}",
        at(&missing)
    );
    assert!(
        at(&misnamed).contains(":2:") && at(&misnamed).contains("folder"),
        "{}",
        at(&misnamed)
    );
}

#[test]
fn a_fifo_in_a_skills_place_is_refused_at_once_not_waited_on() {
    let w = World::new();
    let root = w.project.join(".dsh/skills");
    skill(&root, "good", "works");
    let fifo = root.join("trap/SKILL.md");
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    nix_mkfifo(&fifo);
    let command_fifo = w.project.join(".dsh/commands/wait.md");
    std::fs::create_dir_all(command_fifo.parent().unwrap()).unwrap();
    nix_mkfifo(&command_fifo);
    // A FIFO nobody writes would block an ordinary open forever: discovery runs on a thread
    // and must finish well within the bound.
    let places = w.places();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Catalog::discover(&places));
    });
    let catalog = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("discovery hung on a FIFO");
    assert_eq!(catalog.skills().len(), 1);
    let problems: Vec<String> = catalog.problems().iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems.iter().all(|p| p.contains("FIFO")), "{problems:?}");
}

fn nix_mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn commands_come_from_three_roots_nearest_first_and_built_in_names_are_refused() {
    let w = World::new();
    write(
        &w.project.join(".dsh/commands/review.md"),
        "---\ndescription: Review a file\nargument-hint: FILE [FOCUS]\n---\nReview $1 with focus on $2.\n",
    );
    write(
        &w.project.join(".claude/commands/review.md"),
        "Claude's review\n",
    );
    write(
        &w.project.join(".claude/commands/fix-issue.md"),
        "# Fix an issue\nFix issue $ARGUMENTS.\n",
    );
    write(
        &w.dsh_home.join("commands/standup.md"),
        "Write my standup.\n",
    );
    write(
        &w.project.join(".dsh/commands/help.md"),
        "Not the built-in.\n",
    );
    write(
        &w.project.join(".dsh/commands/notes.txt"),
        "not a command\n",
    );
    let catalog = w.catalog();
    let names: Vec<&str> = catalog.commands().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["fix-issue", "review", "standup"]);
    let review = &catalog.commands()[1];
    assert_eq!(review.description, "Review a file");
    assert_eq!(review.argument_hint.as_deref(), Some("FILE [FOCUS]"));
    assert_eq!(catalog.commands()[0].description, "Fix an issue");
    assert_eq!(catalog.shadowed().len(), 1);
    assert_eq!(catalog.shadowed()[0].kind, Kind::Command);
    let problems: Vec<String> = catalog.problems().iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("/help is a built-in command"),
        "{problems:?}"
    );
}

#[test]
fn a_slash_line_expands_arguments_into_the_command_or_the_skill() {
    let w = World::new();
    write(
        &w.project.join(".dsh/commands/review.md"),
        "---\ndescription: Review\n---\nReview $1 (focus: $2). Everything: $ARGUMENTS\n",
    );
    write(
        &w.project.join(".dsh/commands/plain.md"),
        "Tidy the imports.\n",
    );
    skill(&w.project.join(".dsh/skills"), "pdf", "Read PDFs");
    let catalog = w.catalog();
    let review = catalog
        .expand("/review src/lib.rs \"error paths\"")
        .unwrap()
        .unwrap();
    assert_eq!(review.kind, Kind::Command);
    assert_eq!(
        review.prompt,
        "Review src/lib.rs (focus: error paths). Everything: src/lib.rs \"error paths\""
    );
    let plain = catalog.expand("/plain in src/").unwrap().unwrap();
    assert_eq!(plain.prompt, "Tidy the imports.\n\nARGUMENTS: in src/");
    let pdf = catalog.expand("/pdf report.pdf").unwrap().unwrap();
    assert_eq!(pdf.kind, Kind::Skill);
    assert!(pdf.prompt.contains("Do the pdf thing."), "{}", pdf.prompt);
    assert!(
        pdf.prompt.contains("ARGUMENTS: report.pdf"),
        "{}",
        pdf.prompt
    );
    assert!(
        pdf.prompt
            .contains(&w.project.join(".dsh/skills/pdf").display().to_string())
    );
    // Not an invocation: unknown names, paths, ordinary text.
    assert!(catalog.expand("/unknown x").is_none());
    assert!(catalog.expand("/usr/bin/env").is_none());
    assert!(catalog.expand("review this").is_none());
    // A command edited after the session started is read as it is now.
    write(
        &w.project.join(".dsh/commands/plain.md"),
        "Sort the imports.\n",
    );
    assert_eq!(
        catalog.expand("/plain").unwrap().unwrap().prompt,
        "Sort the imports."
    );
    // And one removed is an error naming the file.
    std::fs::remove_file(w.project.join(".dsh/commands/plain.md")).unwrap();
    let gone = catalog.expand("/plain").unwrap().unwrap_err().to_string();
    assert!(gone.contains("plain.md") && gone.contains("gone"), "{gone}");
}

#[test]
fn invocation_controls_decide_who_sees_a_skill() {
    let w = World::new();
    let root = w.project.join(".dsh/skills");
    write(
        &root.join("deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Ship it\ndisable-model-invocation: true\n---\nSteps\n",
    );
    write(
        &root.join("style/SKILL.md"),
        "---\nname: style\ndescription: House style\nuser-invocable: false\n---\nRules\n",
    );
    let catalog = w.catalog();
    let model: Vec<&str> = catalog.model_skills().map(|s| s.name.as_str()).collect();
    assert_eq!(model, ["style"]);
    let person: Vec<String> = catalog
        .slash_entries()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(person, ["deploy"]);
    assert!(catalog.expand("/style").is_none());
    let section = dsh_skills::prompt::render(&catalog).unwrap();
    assert!(
        section.contains("<skill name=\"style\">House style</skill>"),
        "{section}"
    );
    assert!(!section.contains("deploy"), "{section}");
}
