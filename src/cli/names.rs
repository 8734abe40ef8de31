//! The names an option takes (kinds, statuses, accesses, search modes), offered to shell
//! completions and listed in `--help`, but checked by somna itself. A leaf: the verbs' argument
//! structs use it.

/// The names an option takes, offered to shell completions and listed in `--help`, but checked
/// by somna itself (so a wrong one gets somna's message, which names them all).
#[derive(Clone, Copy, Debug)]
pub struct Names(pub fn() -> Vec<&'static str>);

impl clap::builder::TypedValueParser for Names {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            (self.0)()
                .into_iter()
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

/// The kinds a memory may have.
pub fn kinds() -> Vec<&'static str> {
    somna::Kind::ALL.iter().map(|k| k.as_str()).collect()
}

/// The statuses a memory may have.
pub fn statuses() -> Vec<&'static str> {
    somna::Status::ALL.iter().map(|s| s.as_str()).collect()
}

/// The access levels of a grant.
pub fn accesses() -> Vec<&'static str> {
    somna::trust::Access::ALL
        .iter()
        .map(|a| a.as_str())
        .collect()
}

/// The ranking modes of a search.
pub fn modes() -> Vec<&'static str> {
    somna::SearchMode::ALL.iter().map(|m| m.as_str()).collect()
}
