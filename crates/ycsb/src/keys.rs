//! Key sets: which byte strings the records have.
//!
//! Every key set is a function from a record number `i` (0, 1, 2, …) to a distinct key, so the
//! load phase, inserts during the run phase and every engine see the same keys for the same seed.
//!
//! - `dense`: `i` as 8 big-endian bytes (0..N, numeric order is byte order).
//! - `sparse`: a seeded bijection of `i` over all of u64 (splitmix64's finaliser, which is
//!   invertible, so keys are distinct), as 8 big-endian bytes.
//! - `urls`: `https://` + a host + 1–4 path segments + a last segment carrying `i` in base 36.
//!   Hosts are drawn with a skew from 48 (so a few hosts hold most keys) and path words from a
//!   vocabulary of about 120 words, so many keys share long prefixes, as real URL sets do; typical length
//!   40–90 bytes.
//! - `wiki`: 1–3 capitalised words joined by `_` and a `_` + base-36 `i` suffix, like short
//!   article titles; typical length 10–30 bytes.
//! - `file:PATH`: one key per line of a file (trailing `\r` removed, empty lines skipped,
//!   duplicates an error); record `i` is line `i`.

use std::path::{Path, PathBuf};

use crate::WorkloadError;

/// Which keys the records have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySet {
    /// 0..N as 8-byte big-endian.
    Dense,
    /// Random distinct u64s as 8-byte big-endian.
    Sparse,
    /// URL-shaped strings with long shared prefixes.
    Urls,
    /// Short title-shaped strings.
    Wiki,
    /// Keys read from a file, one per line.
    File(PathBuf),
}

impl KeySet {
    /// Parses `dense|sparse|urls|wiki|file:PATH`.
    pub fn parse(s: &str) -> Result<Self, WorkloadError> {
        Ok(match s {
            "dense" => KeySet::Dense,
            "sparse" => KeySet::Sparse,
            "urls" => KeySet::Urls,
            "wiki" => KeySet::Wiki,
            _ => match s.strip_prefix("file:") {
                Some(p) if !p.is_empty() => KeySet::File(PathBuf::from(p)),
                _ => {
                    return Err(WorkloadError::Invalid(format!(
                        "unknown key set `{s}`; valid: dense, sparse, urls, wiki, file:PATH"
                    )))
                }
            },
        })
    }

    /// Prepares a generator for this key set.
    pub fn generator(&self, seed: u64) -> Result<KeyGen, WorkloadError> {
        Ok(match self {
            KeySet::Dense => KeyGen::Dense,
            KeySet::Sparse => KeyGen::Sparse { seed },
            KeySet::Urls => KeyGen::Urls { seed },
            KeySet::Wiki => KeyGen::Wiki { seed },
            KeySet::File(p) => KeyGen::File {
                keys: read_key_file(p)?,
            },
        })
    }
}

/// Produces the key of record `i`.
#[derive(Debug, Clone)]
pub enum KeyGen {
    /// See [`KeySet::Dense`].
    Dense,
    /// See [`KeySet::Sparse`].
    Sparse {
        /// Seed of the bijection.
        seed: u64,
    },
    /// See [`KeySet::Urls`].
    Urls {
        /// Seed of the choices.
        seed: u64,
    },
    /// See [`KeySet::Wiki`].
    Wiki {
        /// Seed of the choices.
        seed: u64,
    },
    /// See [`KeySet::File`].
    File {
        /// The file's keys, in line order.
        keys: Vec<Vec<u8>>,
    },
}

impl KeyGen {
    /// How many distinct keys this generator can produce (`None`: effectively unbounded).
    pub fn capacity(&self) -> Option<u64> {
        match self {
            KeyGen::File { keys } => Some(keys.len() as u64),
            _ => None,
        }
    }

    /// Appends the key of record `i` to `out`. `i` must be below [`KeyGen::capacity`].
    pub fn write_key(&self, i: u64, out: &mut Vec<u8>) {
        match self {
            KeyGen::Dense => out.extend_from_slice(&i.to_be_bytes()),
            KeyGen::Sparse { seed } => out.extend_from_slice(&mix64(i ^ seed).to_be_bytes()),
            KeyGen::Urls { seed } => write_url(mix64(i.wrapping_add(seed.rotate_left(32))), i, out),
            KeyGen::Wiki { seed } => {
                write_title(mix64(i.wrapping_add(seed.rotate_left(17))), i, out)
            }
            KeyGen::File { keys } => out.extend_from_slice(&keys[i as usize]),
        }
    }
}

/// splitmix64's finaliser: a bijection on u64 (each step is invertible).
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const HOSTS: &[&str] = &[
    "www.example.com",
    "en.wikipedia.org",
    "www.youtube.com",
    "github.com",
    "news.ycombinator.com",
    "www.reddit.com",
    "docs.rs",
    "crates.io",
    "stackoverflow.com",
    "www.bbc.co.uk",
    "www.nytimes.com",
    "www.amazon.com",
    "www.ebay.com",
    "archive.org",
    "www.imdb.com",
    "www.theguardian.com",
    "medium.com",
    "www.nature.com",
    "arxiv.org",
    "dl.acm.org",
    "www.vldb.org",
    "www.usenix.org",
    "blog.example.net",
    "shop.example.org",
    "maps.example.com",
    "mail.example.com",
    "api.example.io",
    "cdn.example.net",
    "static.example.com",
    "forum.example.org",
    "wiki.example.org",
    "www.gov.uk",
    "www.weather.com",
    "www.espn.com",
    "www.cnn.com",
    "www.linkedin.com",
    "www.pinterest.com",
    "www.tumblr.com",
    "www.flickr.com",
    "www.quora.com",
    "www.yelp.com",
    "www.tripadvisor.com",
    "www.booking.com",
    "www.airbnb.com",
    "www.etsy.com",
    "www.walmart.com",
    "www.target.com",
    "www.ikea.com",
];

const WORDS: &[&str] = &[
    "about",
    "account",
    "archive",
    "article",
    "articles",
    "blog",
    "book",
    "books",
    "browse",
    "category",
    "city",
    "comments",
    "community",
    "company",
    "contact",
    "content",
    "data",
    "details",
    "docs",
    "download",
    "edit",
    "events",
    "faq",
    "features",
    "files",
    "forum",
    "gallery",
    "guide",
    "help",
    "history",
    "home",
    "images",
    "index",
    "info",
    "item",
    "items",
    "jobs",
    "latest",
    "learn",
    "library",
    "list",
    "local",
    "login",
    "map",
    "media",
    "members",
    "music",
    "network",
    "news",
    "page",
    "pages",
    "people",
    "photos",
    "post",
    "posts",
    "press",
    "product",
    "products",
    "profile",
    "projects",
    "questions",
    "recent",
    "reference",
    "release",
    "reports",
    "research",
    "resources",
    "reviews",
    "science",
    "search",
    "section",
    "services",
    "settings",
    "shop",
    "show",
    "sports",
    "store",
    "story",
    "support",
    "tag",
    "tags",
    "team",
    "topic",
    "topics",
    "tools",
    "travel",
    "user",
    "users",
    "video",
    "videos",
    "view",
    "watch",
    "world",
    "year",
    "alpha",
    "beta",
    "river",
    "mountain",
    "garden",
    "winter",
    "summer",
    "battle",
    "king",
    "queen",
    "village",
    "island",
    "station",
    "church",
    "school",
    "bridge",
    "castle",
    "valley",
    "lake",
    "forest",
    "street",
    "railway",
    "museum",
    "county",
];

fn base36(mut n: u64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 13];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize];
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

fn write_url(mut h: u64, i: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"https://");
    // Skewed host choice: the minimum of two draws favours low indices.
    let hosts = HOSTS.len() as u64;
    let host = ((h % hosts).min((h >> 8) % hosts)) as usize;
    h = mix64(h);
    out.extend_from_slice(HOSTS[host].as_bytes());
    let segments = 1 + (h % 4);
    for s in 0..segments {
        h = mix64(h ^ s);
        out.push(b'/');
        // Earlier segments draw from fewer words, so prefixes are widely shared.
        let choices = [6u64, 24, 60, 120][s as usize];
        out.extend_from_slice(WORDS[(h % choices.min(WORDS.len() as u64)) as usize].as_bytes());
    }
    out.push(b'/');
    out.extend_from_slice(WORDS[((h >> 20) % WORDS.len() as u64) as usize].as_bytes());
    out.push(b'-');
    base36(i, out);
    if h >> 63 == 1 {
        out.extend_from_slice(b".html");
    }
}

fn write_title(mut h: u64, i: u64, out: &mut Vec<u8>) {
    let words = 1 + (h % 3);
    for w in 0..words {
        h = mix64(h ^ w);
        let word = WORDS[(h % WORDS.len() as u64) as usize].as_bytes();
        if w > 0 {
            out.push(b'_');
        }
        out.push(word[0].to_ascii_uppercase());
        out.extend_from_slice(&word[1..]);
    }
    out.push(b'_');
    base36(i, out);
}

fn read_key_file(path: &Path) -> Result<Vec<Vec<u8>>, WorkloadError> {
    let text = std::fs::read(path).map_err(|e| WorkloadError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut keys = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (n, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        if !seen.insert(line) {
            return Err(WorkloadError::Parse {
                path: path.to_path_buf(),
                line: n + 1,
                detail: format!("duplicate key `{}`", String::from_utf8_lossy(line)),
            });
        }
        keys.push(line.to_vec());
    }
    if keys.is_empty() {
        return Err(WorkloadError::Parse {
            path: path.to_path_buf(),
            line: 0,
            detail: "no keys in file".into(),
        });
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(set: &KeySet, n: u64) -> Vec<Vec<u8>> {
        let g = set.generator(7).expect("generator");
        (0..n)
            .map(|i| {
                let mut k = Vec::new();
                g.write_key(i, &mut k);
                k
            })
            .collect()
    }

    #[test]
    fn every_generated_key_set_is_distinct() {
        for set in [KeySet::Dense, KeySet::Sparse, KeySet::Urls, KeySet::Wiki] {
            let ks = keys(&set, 50_000);
            let unique: std::collections::HashSet<_> = ks.iter().collect();
            assert_eq!(unique.len(), ks.len(), "{set:?} produced duplicate keys");
        }
    }

    #[test]
    fn urls_share_long_prefixes_and_titles_are_short() {
        let mut urls = keys(&KeySet::Urls, 20_000);
        urls.sort();
        let common: usize = urls
            .windows(2)
            .map(|w| w[0].iter().zip(&w[1]).take_while(|(a, b)| a == b).count())
            .sum::<usize>()
            / (urls.len() - 1);
        assert!(
            common >= 20,
            "adjacent sorted URLs share only {common} bytes on average"
        );
        let titles = keys(&KeySet::Wiki, 20_000);
        let avg = titles.iter().map(Vec::len).sum::<usize>() / titles.len();
        assert!((8..=30).contains(&avg), "average title length {avg}");
    }

    #[test]
    fn dense_keys_sort_numerically() {
        let ks = keys(&KeySet::Dense, 1000);
        assert!(ks.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn key_file_rejects_duplicates_and_names_the_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("keys.txt");
        std::fs::write(&p, "a\nb\r\n\nc\nb\n").expect("write");
        let err = KeySet::File(p)
            .generator(0)
            .expect_err("duplicate must fail");
        assert!(err.to_string().contains(":5:"), "{err}");
    }
}
