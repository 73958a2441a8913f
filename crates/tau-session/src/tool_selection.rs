//! Which tools a run offers (tools-resources §1): pi's default built-in set, or what
//! `--tools`, `--exclude-tools`, `--no-tools` and `--no-builtin-tools` select, then the active
//! host tools the same flags allow.

use crate::SessionConfig;

/// The command line's tool flags.
#[derive(Debug, Clone, Copy)]
pub struct ToolSelection<'a> {
    /// `--tools`: only these (built-in and host).
    pub only: Option<&'a [String]>,
    /// `--exclude-tools`.
    pub exclude: &'a [String],
    /// `--no-tools`: none at all (unless `--tools` names some).
    pub none: bool,
    /// `--no-builtin-tools`.
    pub no_builtin: bool,
}

impl<'a> ToolSelection<'a> {
    pub fn of(config: &'a SessionConfig) -> Self {
        Self {
            only: config.tools.as_deref(),
            exclude: &config.exclude_tools,
            none: config.no_tools,
            no_builtin: config.no_builtin_tools,
        }
    }

    /// Whether the flags allow a tool of this name at all (a host tool must also be active).
    pub fn allows(&self, name: &str) -> bool {
        let listed = match self.only {
            Some(list) => list.iter().any(|t| t.trim() == name),
            None => !self.none,
        };
        listed && !self.exclude.iter().any(|t| t.trim() == name)
    }

    /// Every built-in tool the flags allow, inactive ones included (`pi.getAllTools`).
    pub fn every_builtin(&self) -> Vec<&'static str> {
        tau_tools::BUILTIN_TOOLS
            .into_iter()
            .filter(|name| (self.only.is_some() || !self.no_builtin) && self.allows(name))
            .collect()
    }

    /// The built-in tools a run offers, in tau's fixed order: with `--tools`, those it names;
    /// otherwise pi's default set, unless `--no-builtin-tools`.
    pub fn builtin(&self) -> Vec<&'static str> {
        tau_tools::BUILTIN_TOOLS
            .into_iter()
            .filter(|name| match self.only {
                Some(_) => self.allows(name),
                None => {
                    !self.no_builtin
                        && tau_tools::DEFAULT_ACTIVE_TOOLS.contains(name)
                        && self.allows(name)
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_flags_select_as_pi_does() {
        let none: &[String] = &[];
        let default = ToolSelection {
            only: None,
            exclude: none,
            none: false,
            no_builtin: false,
        };
        assert_eq!(
            default.builtin(),
            ["read", "bash", "edit", "write", "todo_write"]
        );
        assert!(default.allows("my_host_tool"));

        let only = names(&["grep", " ls ", "my_host_tool"]);
        let listed = ToolSelection {
            only: Some(&only),
            ..default
        };
        assert_eq!(listed.builtin(), ["grep", "ls"]);
        assert!(listed.allows("my_host_tool") && !listed.allows("other"));

        let exclude = names(&["bash"]);
        let excluded = ToolSelection {
            exclude: &exclude,
            ..default
        };
        assert_eq!(excluded.builtin(), ["read", "edit", "write", "todo_write"]);

        let nothing = ToolSelection {
            none: true,
            ..default
        };
        assert!(nothing.builtin().is_empty() && !nothing.allows("my_host_tool"));
        // `--tools` wins over `--no-tools`.
        let named = ToolSelection {
            only: Some(&only),
            none: true,
            ..default
        };
        assert_eq!(named.builtin(), ["grep", "ls"]);

        let hosts_only = ToolSelection {
            no_builtin: true,
            ..default
        };
        assert!(hosts_only.builtin().is_empty() && hosts_only.allows("my_host_tool"));
    }
}
