//! Tree options and their CLI spelling (`btree:layout=...,page_size=N,redistribute=BOOL`).

use crate::page::{
    slotted::{FLAG_HEADS, FLAG_HINTS},
    DEFAULT_PAGE_SIZE, KIND_FP_LEAF, KIND_LEAF, MAX_PAGE_SIZE, MIN_PAGE_SIZE,
};

/// Which of the paper's node-layout optimizations are on (cumulative, as in its Figure 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Section 2: slotted pages, no optimizations.
    Baseline,
    /// + prefix truncation (section 3.1).
    Prefix,
    /// + 4-byte heads in the slots (section 3.2).
    Heads,
    /// + the 16-entry hint array (section 3.3).
    Hints,
    /// Hints in inner nodes, fingerprinting leaves (section 3.4).
    Fingerprint,
    /// Hints, plus semi-dense leaves wherever their preconditions hold and they take no more
    /// space than a comparison leaf (section 3.5).
    Semidense,
    /// Hints, plus fully-dense leaves wherever their preconditions hold (section 3.5).
    Dense,
    /// The adaptive B-tree of section 5: dense leaves where possible, else comparison or
    /// fingerprinting leaves chosen by key- and operation-adaption.
    Adaptive,
}

impl Layout {
    /// Every implemented layout, in the paper's order (Figure 7, then the leaf layouts of
    /// sections 3.4 and 3.5, then section 5).
    pub const ALL: [Layout; 8] = [
        Layout::Baseline,
        Layout::Prefix,
        Layout::Heads,
        Layout::Hints,
        Layout::Fingerprint,
        Layout::Semidense,
        Layout::Dense,
        Layout::Adaptive,
    ];

    /// The layout's number in a database's state (`docs/format.md`); stable across versions
    /// (semidense came last, so it is 7).
    pub fn code(self) -> u8 {
        match self {
            Layout::Baseline => 0,
            Layout::Prefix => 1,
            Layout::Heads => 2,
            Layout::Hints => 3,
            Layout::Fingerprint => 4,
            Layout::Dense => 5,
            Layout::Adaptive => 6,
            Layout::Semidense => 7,
        }
    }

    /// The layout numbered `code`, if any.
    pub fn from_code(code: u8) -> Option<Layout> {
        Layout::ALL.into_iter().find(|l| l.code() == code)
    }

    /// The name used in option strings.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Baseline => "baseline",
            Layout::Prefix => "prefix",
            Layout::Heads => "heads",
            Layout::Hints => "hints",
            Layout::Fingerprint => "fingerprint",
            Layout::Semidense => "semidense",
            Layout::Dense => "dense",
            Layout::Adaptive => "adaptive",
        }
    }

    /// Parses a layout name.
    pub fn parse(s: &str) -> Result<Layout, String> {
        Layout::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown layout '{s}'; valid layouts: {}",
                    Layout::ALL.map(Layout::name).join(", ")
                )
            })
    }

    /// Whether keys are stored without their node's common fence prefix.
    pub fn prefix_truncation(self) -> bool {
        self != Layout::Baseline
    }

    /// Page flags of slotted nodes in this layout.
    pub fn flags(self) -> u8 {
        match self {
            Layout::Baseline | Layout::Prefix => 0,
            Layout::Heads => FLAG_HEADS,
            Layout::Hints
            | Layout::Fingerprint
            | Layout::Semidense
            | Layout::Dense
            | Layout::Adaptive => FLAG_HEADS | FLAG_HINTS,
        }
    }

    /// Whether fully-dense leaves are created where possible.
    pub fn dense_leaves(self) -> bool {
        matches!(self, Layout::Dense | Layout::Adaptive)
    }

    /// Whether semi-dense leaves are created where possible. The adaptive layout does not use
    /// them: the paper's adaptive policy (section 5.1) chooses among comparison, fingerprinting
    /// and fully-dense leaves only.
    pub fn semi_dense_leaves(self) -> bool {
        self == Layout::Semidense
    }

    /// Whether leaves adapt between comparison and fingerprinting layouts (section 5).
    pub fn adaptive(self) -> bool {
        self == Layout::Adaptive
    }

    /// Kind of the leaves this layout creates when they are not dense.
    pub fn leaf_kind(self) -> u8 {
        match self {
            Layout::Fingerprint => KIND_FP_LEAF,
            _ => KIND_LEAF,
        }
    }
}

/// Options of a [`crate::btree::BTree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Node layout. Default: `adaptive`.
    pub layout: Layout,
    /// Page size in bytes, 2048..=65536. Default 4096.
    pub page_size: usize,
    /// Deferred splits (B*-tree style): a full leaf first moves records into a neighbour under
    /// the same parent that has room, and splits only when neither has (see the module docs of
    /// `btree::redistribute`). Not in the paper; raises the leaf fill after random inserts from
    /// about 69% to about 85%, at about half the insert time on string keys. A policy, not a
    /// format: a tree may be opened either way. Default false (the paper's 50/50 splits); the
    /// durable `Db` turns it on by default ([`crate::DbOptions::redistribute`]).
    pub redistribute: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            layout: Layout::Adaptive,
            page_size: DEFAULT_PAGE_SIZE,
            redistribute: false,
        }
    }
}

/// The option keys [`Options::set`] accepts.
pub const OPTION_KEYS: [&str; 3] = ["layout", "page_size", "redistribute"];

impl Options {
    /// Sets one option from its string form (`layout=hints`, `page_size=8192`,
    /// `redistribute=false`).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "layout" => self.layout = Layout::parse(value)?,
            "page_size" => {
                let n: usize = value
                    .parse()
                    .map_err(|_| format!("page_size '{value}' is not a number of bytes"))?;
                if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&n) {
                    return Err(format!(
                        "page_size {n} is outside {MIN_PAGE_SIZE}..={MAX_PAGE_SIZE}"
                    ));
                }
                self.page_size = n;
            }
            "redistribute" => self.redistribute = parse_bool(key, value)?,
            _ => {
                return Err(format!(
                    "unknown btree option '{key}'; valid options: {}",
                    OPTION_KEYS.join(", ")
                ))
            }
        }
        Ok(())
    }
}

/// `true|1|yes` or `false|0|no`.
pub(crate) fn parse_bool(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("{key} '{value}' is not true or false")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn set_parses_and_rejects() {
        let mut o = Options::default();
        o.set("layout", "baseline").unwrap();
        o.set("page_size", "8192").unwrap();
        assert_eq!(o.layout, Layout::Baseline);
        assert_eq!(o.page_size, 8192);
        let e = o.set("colour", "red").unwrap_err();
        assert!(e.contains("layout") && e.contains("page_size"), "{e}");
        assert!(o.set("layout", "sparse").unwrap_err().contains("semidense"));
        o.set("layout", "semidense").unwrap();
        assert_eq!(o.layout, Layout::Semidense);
        assert_eq!(Options::default().layout, Layout::Adaptive);
        for l in Layout::ALL {
            assert_eq!(Layout::parse(l.name()), Ok(l));
            assert_eq!(Layout::from_code(l.code()), Some(l));
        }
        // The codes of databases written before semidense existed keep their meaning.
        assert_eq!(Layout::from_code(5), Some(Layout::Dense));
        assert_eq!(Layout::from_code(6), Some(Layout::Adaptive));
        assert_eq!(Layout::from_code(8), None);
        assert!(o.set("page_size", "1024").is_err());
        assert!(o.set("page_size", "65537").is_err());
        assert!(o.set("page_size", "x").is_err());
        // The paper's split policy by default in memory; the database's default differs.
        assert!(!o.redistribute);
        assert!(crate::DbOptions::default().redistribute);
        o.set("redistribute", "true").unwrap();
        assert!(o.redistribute);
        o.set("redistribute", "false").unwrap();
        assert!(!o.redistribute);
        assert!(o.set("redistribute", "maybe").is_err());
    }
}
