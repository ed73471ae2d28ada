//! Page content: what the pages of a region hold once written, which is
//! what zram (and zswap) compress. Shared by both engines: the simulator
//! needs each page's kind (which draws its stored size and compression
//! time from the machine profile), the native runner writes the bytes
//! (`fill`), and `mmsim calibrate` measures the kernel's compressors on
//! the same bytes.
//!
//! Without a `content` key a region's pages hold what the runner's
//! touches always left in them: a 4-byte token and zeros (`None` here),
//! priced by the profile's `zram_*` constants as before.

use crate::rng::{splitmix64, Rng};

pub const PAGE: usize = 4096;

/// One kind of page content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Zeros (a written but cleared buffer): zram's and zswap's
    /// same-filled path with the value 0.
    Zero,
    /// One 8-byte value repeated over the page (non-zero): same-filled too.
    Same,
    /// English-like text: words of a fixed list of 256 with a skewed
    /// choice, spaces and punctuation.
    Text,
    /// Random bytes: no compressor shrinks them (zram stores the page
    /// whole, a "huge" object).
    Random,
    /// Zeros, then 4096/ratio random bytes to the page's end: compresses
    /// to about 1/ratio of the page under an LZ compressor. The ratio in
    /// hundredths (300 = 3.0).
    Ratio(u32),
}

impl Kind {
    /// The name in specs, profiles and outputs: zero, same, text, random,
    /// ratio-3.00.
    pub fn name(self) -> String {
        match self {
            Kind::Zero => "zero".into(),
            Kind::Same => "same".into(),
            Kind::Text => "text".into(),
            Kind::Random => "random".into(),
            Kind::Ratio(r) => format!("ratio-{}.{:02}", r / 100, r % 100),
        }
    }

    /// Parses `name()`'s words.
    pub fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "zero" => Kind::Zero,
            "same" => Kind::Same,
            "text" => Kind::Text,
            "random" => Kind::Random,
            _ => {
                let r: f64 = s.strip_prefix("ratio-")?.parse().ok()?;
                Kind::Ratio(ratio_hundredths(r)?)
            }
        })
    }

    /// Same-filled: zram and zswap store the value, not a compressed copy.
    pub fn same_filled(self) -> bool {
        matches!(self, Kind::Zero | Kind::Same)
    }
}

/// The smallest and largest ratio a spec may state.
pub const RATIO_MIN: f64 = 1.0;
pub const RATIO_MAX: f64 = 32.0;

/// A ratio in hundredths, if within RATIO_MIN..=RATIO_MAX.
pub fn ratio_hundredths(r: f64) -> Option<u32> {
    (r.is_finite() && (RATIO_MIN..=RATIO_MAX).contains(&r)).then(|| (r * 100.0).round() as u32)
}

/// What a region's pages hold: one kind, or a mix with integer weights,
/// each page drawing its kind once (by region name and page number, so
/// both engines and every fork agree).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Content {
    pub parts: Vec<(Kind, u32)>,
}

impl Content {
    pub fn one(kind: Kind) -> Content {
        Content {
            parts: vec![(kind, 1)],
        }
    }

    /// The kind of page `page` of region `region`.
    pub fn kind_of(&self, region: &str, page: u64) -> Kind {
        if self.parts.len() == 1 {
            return self.parts[0].0;
        }
        let total: u64 = self.parts.iter().map(|p| p.1 as u64).sum();
        let mut x = splitmix64(name_hash(region) ^ splitmix64(page)) % total;
        for &(kind, w) in &self.parts {
            if x < w as u64 {
                return kind;
            }
            x -= w as u64;
        }
        unreachable!("a draw below the total weight")
    }

    /// The kinds it can draw, each once, in order.
    pub fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        self.parts.iter().map(|p| p.0)
    }
}

/// FNV-1a of a region name: the draw's salt.
fn name_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Writes a page of `kind` into `buf` (4096 bytes). `key` varies the
/// bytes from page to page (the runner passes the page number); `token`
/// is the runner's content token, which a same-filled page repeats (a
/// zero page ignores it) and other kinds carry in their first 4 bytes.
pub fn fill(kind: Kind, key: u64, token: u32, buf: &mut [u8]) {
    let buf = &mut buf[..PAGE];
    match kind {
        Kind::Zero => buf.fill(0),
        Kind::Same => fill_same(token, buf),
        Kind::Random => fill_random(key, buf),
        Kind::Ratio(r) => {
            let n = PAGE - random_part(r);
            buf[..n].fill(0);
            fill_random(key, &mut buf[n..]);
        }
        Kind::Text => fill_text(key, buf),
    }
    if !kind.same_filled() {
        buf[..4].copy_from_slice(&token.to_ne_bytes());
    }
}

/// A same-filled page of `token` (every u32 of the page; the 8-byte words
/// zram compares are then all equal).
pub fn fill_same(token: u32, buf: &mut [u8]) {
    for w in buf.chunks_exact_mut(4) {
        w.copy_from_slice(&token.to_ne_bytes());
    }
}

/// Random bytes at the end of a ratio-`r` page (r in hundredths), after
/// zeros. Zeros first: LZO1X-1 and LZ4 step further the longer they find
/// no match, so zeros after random bytes would be passed over as literals
/// for a while (6-8 % more bytes under LZO1X-1); the random run at the end
/// is literals to the page's end either way.
pub fn random_part(r: u32) -> usize {
    ((PAGE as u64 * 100).div_ceil(r.max(100) as u64) as usize).min(PAGE)
}

fn fill_random(key: u64, buf: &mut [u8]) {
    let mut rng = Rng::new(splitmix64(key ^ 0x7261_6e64_6f6d));
    for c in buf.chunks_mut(8) {
        let v = rng.next_u64().to_ne_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
}

/// 256 common English words, most frequent first.
const WORDS: &str = "the of and to a in is it you that he was for on are with as i his they \
be at one have this from or had by hot word but what some we can out other were all there when \
up use your how said an each she which do their time if will way about many then them write \
would like so these her long make thing see him two has look more day could go come did number \
sound no most people my over know water than call first who may down side been now find any new \
work part take get place made live where after back little only round man year came show every \
good me give our under name very through just form sentence great think say help low line differ \
turn cause much mean before move right boy old too same tell does set three want air well also \
play small end put home read hand port large spell add even land here must big high such follow \
act why ask men change went light kind off need house picture try us again animal point mother \
world near build self earth father head stand own page should country found answer school grow \
study still learn plant cover food sun four between state keep eye never last let thought city \
tree cross farm hard start might story saw far sea draw left late run while press close night \
real life few north";

/// Text: words drawn with a skew toward the list's head (the product of
/// two uniform draws), a comma every few words, a sentence end with a
/// newline now and then.
fn fill_text(key: u64, buf: &mut [u8]) {
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let mut rng = Rng::new(splitmix64(key ^ 0x7465_7874));
    let mut at = 0;
    while at < buf.len() {
        let (a, b) = (rng.below(256), rng.below(256));
        let w = words[((a * b) >> 8) as usize % words.len()].as_bytes();
        let sep: &[u8] = match rng.below(16) {
            0 => b", ",
            1 => b".\n",
            _ => b" ",
        };
        for &c in w.iter().chain(sep) {
            if at == buf.len() {
                return;
            }
            buf[at] = c;
            at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(kind: Kind, key: u64) -> Vec<u8> {
        let mut b = vec![0xff; PAGE];
        fill(kind, key, 7, &mut b);
        b
    }

    fn lzo1x_len(b: &[u8]) -> usize {
        let mut lzo = minilzo_rs::LZO::init().expect("minilzo");
        lzo.compress(b).expect("compress").len()
    }

    #[test]
    fn names_round_trip() {
        for k in [
            Kind::Zero,
            Kind::Same,
            Kind::Text,
            Kind::Random,
            Kind::Ratio(250),
        ] {
            assert_eq!(Kind::parse(&k.name()), Some(k));
        }
        assert_eq!(Kind::Ratio(300).name(), "ratio-3.00");
        assert_eq!(Kind::parse("ratio-0.5"), None);
        assert_eq!(Kind::parse("ratio-40"), None);
    }

    #[test]
    fn same_filled_pages_are_one_repeated_word() {
        let z = page(Kind::Zero, 3);
        assert!(z.iter().all(|&b| b == 0));
        let s = page(Kind::Same, 3);
        let w: Vec<u64> = s
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert!(w.iter().all(|&x| x == w[0]) && w[0] != 0);
    }

    #[test]
    fn other_kinds_carry_the_token_and_differ_by_key() {
        for k in [Kind::Text, Kind::Random, Kind::Ratio(300)] {
            let (a, b) = (page(k, 1), page(k, 2));
            assert_eq!(&a[..4], &7u32.to_ne_bytes());
            assert_ne!(a, b, "{k:?}");
            assert_eq!(a, page(k, 1), "{k:?} is deterministic");
        }
    }

    /// LZO1X-1 (the algorithm of the kernel's lzo and lzo-rle) shrinks a
    /// ratio-r page to 1/r of it within 6 % up to r = 8 (its stream's
    /// ~30 bytes of overhead show beyond), random pages not at all, text
    /// to about 1/1.6.
    #[test]
    fn ratio_pages_compress_to_their_ratio() {
        for r in [150u32, 200, 300, 400, 800] {
            let got = PAGE as f64 / lzo1x_len(&page(Kind::Ratio(r), 9)) as f64;
            let want = r as f64 / 100.0;
            assert!((got / want - 1.0).abs() < 0.06, "ratio {want}: {got:.3}");
        }
        assert!(lzo1x_len(&page(Kind::Random, 9)) >= PAGE);
        let text = PAGE as f64 / lzo1x_len(&page(Kind::Text, 9)) as f64;
        assert!((1.4..2.0).contains(&text), "text ratio {text:.2}");
    }

    #[test]
    fn a_mix_draws_each_kind_about_by_weight() {
        let c = Content {
            parts: vec![(Kind::Text, 3), (Kind::Zero, 1)],
        };
        let n = 40_000;
        let zeros = (0..n)
            .filter(|&p| c.kind_of("heap", p) == Kind::Zero)
            .count();
        assert!((zeros as f64 / n as f64 - 0.25).abs() < 0.01, "{zeros}");
        // Another region draws other pages.
        let other = (0..n)
            .filter(|&p| c.kind_of("heap", p) != c.kind_of("other", p))
            .count();
        assert!(other > n as usize / 4);
    }
}
