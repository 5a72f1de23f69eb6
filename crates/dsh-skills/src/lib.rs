//! Skills and custom slash commands: Markdown files with frontmatter, found by their place.
//!
//! - **Skills** ([`Skill`]): a folder with a `SKILL.md` (`name`, `description` in its
//!   frontmatter, instructions in its body, more files beside it), from the project's
//!   `.dsh/skills`, `.agents/skills`, `.claude/skills` and the person's `$DSH_HOME/skills`,
//!   `~/.agents/skills`, `~/.claude/skills` ([`Places`]). The model sees the names and
//!   descriptions in the system prompt ([`prompt`]) and loads a skill's body with the `skill`
//!   tool ([`SkillTool`]) when it needs it; a person invokes one as `/name`.
//! - **Custom commands** ([`CustomCommand`]): prompt files `.dsh/commands/NAME.md`,
//!   `.claude/commands/NAME.md`, `$DSH_HOME/commands/NAME.md`; `/NAME args` sends the body with
//!   `$ARGUMENTS` and `$1`…`$9` filled in ([`expand`]).
//!
//! [`Catalog::discover`] finds both once per session (nearest root wins a name; a bad file is
//! skipped and named at its line, never the session). [`attach`] gives an agent its catalog;
//! front ends list and expand `/name` through [`Catalogs`].
//!
//! Every file is read with [`dsh_fs::read_placed`]: a FIFO or device in a skill's place never
//! hangs dsh, and a huge file is refused.

mod catalog;
mod command;
mod error;
pub mod expand;
pub mod frontmatter;
mod places;
mod plugin;
pub mod prompt;
mod reserved;
mod skill;
mod tool;

pub use catalog::{
    Catalog, Expansion, Kind, MAX_ENTRIES_PER_ROOT, Shadowed, SlashEntry, render_list,
    split_invocation,
};
pub use command::CustomCommand;
pub use error::Problem;
pub use places::{Places, Root, Scope, project_root};
pub use plugin::{Catalogs, SkillsPlugin, attach};
pub use reserved::{RESERVED, is_reserved};
pub use skill::{Loaded, MAX_FILE_BYTES, SKILL_FILE, Skill};
pub use tool::{SKILL_TOOL, SkillArgs, SkillTool};
