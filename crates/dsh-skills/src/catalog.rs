//! The skills and commands of one session: found once when it starts, nearest root first.
//!
//! The catalog is fixed for the session's life (what the model was told must stay what the
//! prompt says, byte for byte, so the provider's cache holds); files are read again only for
//! their bodies, on use. Every problem costs its own file, never the session: a file with bad
//! frontmatter is skipped and named with its line, a name taken by a nearer root is shadowed,
//! a command named like a built-in is not offered.

use std::path::{Path, PathBuf};

use crate::command::{self, CustomCommand};
use crate::error::Problem;
use crate::expand;
use crate::places::{Places, Root};
use crate::reserved::is_reserved;
use crate::skill::Skill;

/// At most this many entries of one folder are looked at (a folder of thousands is a
/// mistake, and start-up must not pay for it).
pub const MAX_ENTRIES_PER_ROOT: usize = 512;

/// Which kind of entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A skill (`SKILL.md` folder).
    Skill,
    /// A custom command (prompt file).
    Command,
    /// An MCP server's prompt (`/mcp__SERVER__PROMPT`): not in a catalog, but listed with its
    /// entries by the front ends.
    Prompt,
}

impl Kind {
    /// `skill`, `command` or `prompt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Skill => "skill",
            Kind::Command => "command",
            Kind::Prompt => "prompt",
        }
    }
}

/// An entry that lost its name to a nearer one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shadowed {
    /// What it is.
    pub kind: Kind,
    /// The name both share.
    pub name: String,
    /// Its file.
    pub file: PathBuf,
    /// The file that won.
    pub by: PathBuf,
}

/// What a person can type as `/name`: a custom command, or a skill they may invoke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlashEntry {
    /// The name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// What to type after it.
    pub argument_hint: Option<String>,
    /// A command or a skill.
    pub kind: Kind,
}

/// A `/name args` line expanded into the prompt it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expansion {
    /// The name invoked.
    pub name: String,
    /// A command or a skill.
    pub kind: Kind,
    /// The text to send to the agent.
    pub prompt: String,
}

/// The skills and commands that apply to one session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    skills: Vec<Skill>,
    commands: Vec<CustomCommand>,
    shadowed: Vec<Shadowed>,
    problems: Vec<Problem>,
    skill_roots: Vec<Root>,
    command_roots: Vec<Root>,
}

impl Catalog {
    /// Finds everything in `places`.
    pub fn discover(places: &Places) -> Catalog {
        let mut catalog = Catalog {
            skill_roots: places.skill_roots(),
            command_roots: places.command_roots(),
            ..Catalog::default()
        };
        for root in catalog.skill_roots.clone() {
            for dir in catalog.entries(&root, |p| p.is_dir()) {
                match Skill::read(&dir, &root) {
                    Ok(Some(skill)) => catalog.add_skill(skill),
                    Ok(None) => {}
                    Err(problem) => catalog.problems.push(problem),
                }
            }
        }
        for root in catalog.command_roots.clone() {
            let files = catalog.entries(&root, |p| p.extension().is_some_and(|e| e == "md"));
            for file in files {
                let name = file
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if !command::valid_name(&name) {
                    catalog.problems.push(Problem::new(
                        &file,
                        None,
                        format!(
                            "`{name}` cannot be typed as a command (letters, digits, `-` and `_` \
                             only); not offered"
                        ),
                    ));
                    continue;
                }
                if is_reserved(&name) {
                    catalog.problems.push(Problem::new(
                        &file,
                        None,
                        format!(
                            "/{name} is a built-in command; this file is not offered (rename it)"
                        ),
                    ));
                    continue;
                }
                match CustomCommand::read(&file, &name, &root) {
                    Ok(Some(command)) => catalog.add_command(command),
                    Ok(None) => {}
                    Err(problem) => catalog.problems.push(problem),
                }
            }
        }
        catalog.skills.sort_by(|a, b| a.name.cmp(&b.name));
        catalog.commands.sort_by(|a, b| a.name.cmp(&b.name));
        catalog
    }

    /// The entries of `root` that `keep` accepts, sorted, hidden ones left out; a missing
    /// folder has none and an unreadable one is a problem.
    fn entries(&mut self, root: &Root, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
        let read = match std::fs::read_dir(&root.dir) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            // A file where a folder was expected is treated like no folder.
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Vec::new(),
            Err(e) => {
                self.problems.push(Problem::new(
                    &root.dir,
                    None,
                    format!("cannot be listed: {e}"),
                ));
                return Vec::new();
            }
        };
        let mut paths: Vec<PathBuf> = read
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.path())
            .take(MAX_ENTRIES_PER_ROOT + 1)
            .collect();
        if paths.len() > MAX_ENTRIES_PER_ROOT {
            paths.truncate(MAX_ENTRIES_PER_ROOT);
            self.problems.push(Problem::new(
                &root.dir,
                None,
                format!("holds more than {MAX_ENTRIES_PER_ROOT} entries; the rest were not read"),
            ));
        }
        paths.sort();
        paths.into_iter().filter(|p| keep(p)).collect()
    }

    fn add_skill(&mut self, mut skill: Skill) {
        if let Some(winner) = self.skills.iter().find(|s| s.name == skill.name) {
            self.shadowed.push(Shadowed {
                kind: Kind::Skill,
                name: skill.name,
                file: skill.file,
                by: winner.file.clone(),
            });
            return;
        }
        if skill.user_invocable && is_reserved(&skill.name) {
            self.problems.push(Problem::new(
                &skill.file,
                None,
                format!(
                    "/{} is a built-in command, so this skill is not offered as one (the model \
                     can still load it)",
                    skill.name
                ),
            ));
            skill.user_invocable = false;
        }
        self.skills.push(skill);
    }

    fn add_command(&mut self, command: CustomCommand) {
        if let Some(winner) = self.commands.iter().find(|c| c.name == command.name) {
            self.shadowed.push(Shadowed {
                kind: Kind::Command,
                name: command.name,
                file: command.file,
                by: winner.file.clone(),
            });
            return;
        }
        self.commands.push(command);
    }

    /// Every skill found (winners only), by name.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The skills the model sees and may load, by name.
    pub fn model_skills(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter().filter(|s| s.model_invocable)
    }

    /// The skill the model may load by `name`.
    pub fn model_skill(&self, name: &str) -> Option<&Skill> {
        self.model_skills().find(|s| s.name == name)
    }

    /// Every custom command (winners only), by name.
    pub fn commands(&self) -> &[CustomCommand] {
        &self.commands
    }

    /// Entries that lost their name to a nearer one.
    pub fn shadowed(&self) -> &[Shadowed] {
        &self.shadowed
    }

    /// Files skipped and entries not offered, with why.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// The skill folders searched, nearest first.
    pub fn skill_roots(&self) -> &[Root] {
        &self.skill_roots
    }

    /// The command folders searched, nearest first.
    pub fn command_roots(&self) -> &[Root] {
        &self.command_roots
    }

    /// What a person can type as `/name`, by name: every custom command, then every skill
    /// they may invoke whose name no command took.
    pub fn slash_entries(&self) -> Vec<SlashEntry> {
        let mut entries: Vec<SlashEntry> = self
            .commands
            .iter()
            .map(|c| SlashEntry {
                name: c.name.clone(),
                description: c.description.clone(),
                argument_hint: c.argument_hint.clone(),
                kind: Kind::Command,
            })
            .collect();
        for s in self.skills.iter().filter(|s| s.user_invocable) {
            if !entries.iter().any(|e| e.name == s.name) {
                entries.push(SlashEntry {
                    name: s.name.clone(),
                    description: s.description.clone(),
                    argument_hint: s.argument_hint.clone(),
                    kind: Kind::Skill,
                });
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries
    }

    /// The prompt `line` stands for when it is `/name args…` naming a custom command or a
    /// skill the person may invoke; `None` for anything else (an ordinary message, a path, a
    /// built-in command). A file that cannot be read now is an error naming it.
    pub fn expand(&self, line: &str) -> Option<Result<Expansion, Problem>> {
        let (name, arguments) = split_invocation(line)?;
        if let Some(command) = self.commands.iter().find(|c| c.name == name) {
            return Some(command.expand(arguments).map(|prompt| Expansion {
                name: name.to_owned(),
                kind: Kind::Command,
                prompt,
            }));
        }
        let skill = self
            .skills
            .iter()
            .find(|s| s.user_invocable && s.name == name)?;
        Some(skill.load().map(|loaded| Expansion {
            name: name.to_owned(),
            kind: Kind::Skill,
            prompt: invoked_skill(skill, &loaded.body, arguments),
        }))
    }
}

/// `/name rest` → (`name`, `rest` trimmed); `None` when `line` is not one (no slash, `//`, a
/// path such as `/usr/bin/cc`).
pub fn split_invocation(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (name, arguments) = rest.split_at(end);
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some((name, arguments.trim()))
}

/// The message a person's `/skill args` sends: the skill's instructions, where its files are,
/// and what they asked.
fn invoked_skill(skill: &Skill, body: &str, arguments: &str) -> String {
    format!(
        "Use the skill `{name}` for this request. Its folder is {dir}: paths it mentions are \
         relative to that folder.\n\n<skill name=\"{name}\">\n{body}\n</skill>",
        name = skill.name,
        dir = skill.dir.display(),
        body = expand::substitute(body, arguments),
    )
}

/// A listing of what applies to a session and from where, as `dsh skills list` prints it.
pub fn render_list(catalog: &Catalog) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "skills (nearest folder first):");
    for root in catalog.skill_roots() {
        let _ = writeln!(out, "  {} ({})", root.dir.display(), root.scope.as_str());
    }
    if catalog.skills().is_empty() {
        let _ = writeln!(out, "  (no skills)");
    }
    for s in catalog.skills() {
        let mut how = Vec::new();
        if s.model_invocable {
            how.push("model");
        }
        if s.user_invocable {
            how.push("/name");
        }
        let _ = writeln!(
            out,
            "\n  {} [{}]  {}\n    {}",
            s.name,
            how.join(", "),
            s.dir.display(),
            s.description
        );
    }
    let _ = writeln!(out, "\ncommands (nearest folder first):");
    for root in catalog.command_roots() {
        let _ = writeln!(out, "  {} ({})", root.dir.display(), root.scope.as_str());
    }
    if catalog.commands().is_empty() {
        let _ = writeln!(out, "  (no commands)");
    }
    for c in catalog.commands() {
        let hint = c
            .argument_hint
            .as_deref()
            .map(|h| format!(" {h}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\n  /{}{hint}  {}\n    {}",
            c.name,
            c.file.display(),
            c.description
        );
    }
    if !catalog.shadowed().is_empty() {
        let _ = writeln!(out, "\nshadowed by a nearer one of the same name:");
        for s in catalog.shadowed() {
            let _ = writeln!(
                out,
                "  {} {}: {} (by {})",
                s.kind.as_str(),
                s.name,
                s.file.display(),
                s.by.display()
            );
        }
    }
    if !catalog.problems().is_empty() {
        let _ = writeln!(out, "\nskipped:");
        for p in catalog.problems() {
            let _ = writeln!(out, "  {p}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_leading_slash_word_is_an_invocation() {
        assert_eq!(split_invocation("/review  a b "), Some(("review", "a b")));
        assert_eq!(split_invocation("  /x"), Some(("x", "")));
        assert_eq!(split_invocation("/usr/bin/cc fails"), None);
        assert_eq!(split_invocation("review"), None);
        assert_eq!(split_invocation("/ x"), None);
    }
}
