//! A brief of one work, for "a presentation about X based on our documents": the facets a
//! person wants, each backed by verbatim quotes with their citations.
//!
//! For a play: who's who (the cast list's lines for the characters who speak most), the plot
//! act by act, the main themes, the key passages. For other documents: what it is about, the
//! main points section by section, its key terms, the open questions it raises.
//!
//! Offline there is no model that can be trusted to write prose (the embedded 135M one cannot),
//! so every facet is *extracted* from the document's structure and word statistics: speaker
//! tags and the cast list, the words that set one act or section apart from the others (in a
//! play, with a preference for lines that report what happens, a death, a plot, a marriage,
//! and for lines said as a stage direction shows a deed done), the longest speeches
//! (soliloquies first: who is on stage is followed through the entrances and exits, a speech
//! to the winds or the gods counts as one, and the title role's speeches weigh most), a
//! lexicon of literary themes counted against the collection's other works.
//! Nothing is tuned to one work: the tests run one rubric over several plays and a technical
//! document set. Bullets stay short: a quote longer than [`MAX_WORDS`] is cut at a clause end
//! and marked abridged (the cited bytes are exactly the words shown).
//!
//! Everything here is pure (no I/O): [`crate::rag::RagAgent::brief`] loads the work from the
//! knowledge base and numbers the citations.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use super::keypoints::{Citation, KeyPoint};

/// Set pieces, in the ranking's order, that a [`Reader`] reads for the best-known (each costs
/// the embedded 135M model about 1 s on two cores: ~300 tokens with its lead).
const READ_SPEECHES: usize = 10;
/// Lines of a speech the reader reads, from its start.
const READ_LINES: usize = 16;

/// Words per bullet quote; longer sentences are abridged at a clause end.
pub const MAX_WORDS: usize = 18;

/// What a [`Reader`] knows best of one speech.
#[derive(Debug, Clone, Copy)]
struct Known {
    /// How sure it is of the speech's best-known two lines running.
    best: f32,
    /// Where the first of them starts.
    at: usize,
    /// How sure it is of its first two lines that count (as `best`).
    opening: f32,
}

/// How much surer of a set piece's best-known lines than of the median set piece's the reader
/// must be for it to count as known by heart.
const KNOWN_ABOVE_MEDIAN: f32 = 0.9;

/// How much surer of a line inside a set piece than of its opening the reader must be to
/// quote it instead (Macbeth's "To-morrow, and to-morrow", the third line of his answer to
/// "The queen, my lord, is dead").
const SURER_INSIDE: f32 = 0.5;

/// A reader who knows some lines by heart: how sure it is of each of `lines`, read in order
/// after `lead` (higher is surer). A language model's mean log-probability of a line's
/// tokens does this: the lines people quote, which its training text holds many times over,
/// stand far above the rest (`agentry_local::ChatModel::line_familiarity`). The brief
/// uses it to choose among passages it has already found, never to write: every quote is
/// still the work's own words.
pub trait Reader: Send + Sync {
    /// One value per line (any other count is ignored); `None` when it cannot read them (no
    /// model, an error).
    fn familiarity(&self, lead: &str, lines: &[&str]) -> Option<Vec<f32>>;
}

/// One document as the knowledge base holds it.
#[derive(Debug, Clone, Default)]
pub struct Work {
    /// File name.
    pub document: String,
    /// Its title.
    pub title: String,
    /// Its text, with the offsets citations use (whitespace between chunks may differ).
    pub text: String,
    /// Sections in order: heading path and byte range.
    pub sections: Vec<(String, usize, usize)>,
    /// Chunks in order: id and byte range (a citation names the chunk it is in).
    pub chunks: Vec<(i64, usize, usize)>,
}

impl Work {
    /// A parsed document read whole, as one chunk (id 1): a brief of a file outside any
    /// knowledge base, as the examples make.
    pub fn whole(document: &str, parsed: super::parse::Parsed) -> Self {
        Work {
            document: document.to_owned(),
            title: parsed.title,
            chunks: vec![(1, 0, parsed.text.len())],
            sections: parsed
                .sections
                .into_iter()
                .map(|s| (s.title, s.start, s.end))
                .collect(),
            text: parsed.text,
        }
    }
}

/// One facet of the work: a slide's worth of cited points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facet {
    /// What it is about: `Who's who`, `The plot: Acts I-II`, `Main themes`...
    pub title: String,
    /// Its quoted points, each cited.
    pub points: Vec<KeyPoint>,
}

/// Word counts of a text, for comparing one work against others.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    words: HashMap<String, usize>,
    total: usize,
    /// Documents merged in, and in how many of them each stem occurs.
    docs: usize,
    df: HashMap<String, usize>,
}

impl Counts {
    /// The counts of word stems in `text`.
    pub fn of(text: &str) -> Counts {
        let mut c = Counts::default();
        c.add(text);
        c
    }

    fn add(&mut self, text: &str) {
        for w in tokens(text) {
            self.total += 1;
            *self.words.entry(key(w)).or_default() += 1;
        }
        // Two-word phrases too (their keys hold a space), for key terms; not in the total.
        for (k, _) in phrases(text) {
            *self.words.entry(k).or_default() += 1;
        }
    }

    fn get(&self, k: &str) -> usize {
        self.words.get(k).copied().unwrap_or(0)
    }

    /// Adds another document's counts.
    pub fn merge(&mut self, other: &Counts) {
        for (k, n) in &other.words {
            *self.words.entry(k.clone()).or_default() += n;
            *self.df.entry(k.clone()).or_default() += 1;
        }
        self.total += other.total;
        self.docs += 1;
    }
}

/// Common English and Early Modern English words that carry no topic.
static STOP: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    "a about above after again against all am an and any are as at be because been before being \
     below between both but by can did do does doing down during each few for from further had \
     has have having he her here hers herself him himself his how i if in into is it its itself \
     just me more most my myself no nor not now of off on once only or other our ours ourselves \
     out over own same she should so some such than that the their theirs them themselves then \
     there these they this those through to too under until up very was we were what when where \
     which while who whom why will with would you your yours yourself yourselves thou thee thy \
     thine hath doth dost art shalt wilt ere tis o oh ay nay sir let shall may must come go well \
     yet upon us one make made say said see tell give take like thus might could hast hadst didst \
     canst wouldst shouldst couldst ye yea unto therefore though whose hither thither whither \
     hence thence wherefore ha ho fie alas lo pray sirrah madam mine em th ne er also use used \
     uses using get gets got new many much way ways also via per etc e g ie eg one two three \
     each every within without into onto than then else whether either neither"
        .split_whitespace()
        .collect()
});

/// The words of `text`: letters and inner apostrophes, at least three letters, no stop words.
pub(crate) fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphabetic() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| w.len() >= 3 && !STOP.contains(w.to_lowercase().as_str()))
}

/// Adjacent word pairs with no punctuation or stop word between them (`tail latency`,
/// `task store`): their key (stems) and how they are written.
fn phrases(text: &str) -> impl Iterator<Item = (String, String)> + '_ {
    let mut prev: Option<&str> = None;
    text.split_whitespace().filter_map(move |raw| {
        let clean = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let starts_clean = raw.starts_with(|c: char| c.is_alphanumeric());
        let ends_clean = raw.ends_with(|c: char| c.is_alphanumeric());
        let word = clean.len() >= 3
            && clean.chars().all(|c| c.is_alphabetic() || c == '-')
            && !STOP.contains(clean.to_lowercase().as_str());
        let pair = match (prev, word && starts_clean) {
            (Some(p), true) => Some((
                format!("{} {}", key(p), key(clean)),
                format!("{} {}", p, clean),
            )),
            _ => None,
        };
        prev = (word && ends_clean).then_some(clean);
        pair
    })
}

/// A crude stem: lower case, one common suffix off, a final `e` off (`madness` and `mad`,
/// `revenge` and `revenged` meet).
pub(crate) fn key(w: &str) -> String {
    let mut w = w.to_lowercase();
    for suf in ["ness", "ing", "ed", "'d", "es", "s", "ly"] {
        if w.len() >= suf.len() + 3 && w.ends_with(suf) {
            w.truncate(w.len() - suf.len());
            break;
        }
    }
    if w.len() > 3 && w.ends_with('e') {
        w.pop();
    }
    w
}

/// `text` without what it quotes: a span from an opening quote mark (after a space, a dash or
/// a colon, not an elision such as `'tis`) to a closing mark right after punctuation
/// (`'The croaking raven doth bellow for revenge.'`).
fn unquoted(text: &str) -> String {
    const ELIDED: &[&str] = &[
        "tis", "twas", "twere", "twill", "twould", "gainst", "em", "twixt", "tween",
    ];
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let prev = if i == 0 { ' ' } else { chars[i - 1] };
        let close = match c {
            '\'' | '"' => Some(c),
            '“' => Some('”'),
            '‘' => Some('’'),
            _ => None,
        };
        if let Some(q) = close
            && (prev.is_whitespace() || matches!(prev, '-' | ':' | '—'))
            && chars.get(i + 1).is_some_and(|n| n.is_alphabetic())
        {
            let word: String = chars[i + 1..]
                .iter()
                .take_while(|c| c.is_alphabetic())
                .collect::<String>()
                .to_lowercase();
            let end = (i + 2..chars.len()).find(|&j| {
                chars[j] == q
                    && matches!(chars[j - 1], '.' | '!' | '?' | ',' | ';' | ':')
                    && chars.get(j + 1).is_none_or(|n| !n.is_alphabetic())
            });
            if let Some(j) = end
                && !ELIDED.contains(&word.as_str())
            {
                i = j + 1;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// `text` with runs of whitespace made one space: how a quote is shown.
pub fn normalized(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Title case for headings written in capitals (`ACT III > Scene I` → `Act III, Scene I`),
/// keeping Roman numerals; a heading with lower-case letters is kept as written (`MCP client`).
pub fn heading(section: &str) -> String {
    section
        .split(" > ")
        .map(|part| {
            if part.chars().any(char::is_lowercase) {
                return part.trim_end_matches('.').to_owned();
            }
            part.trim_end_matches('.')
                .split(' ')
                .map(|w| {
                    let roman = !w.is_empty() && w.chars().all(|c| "IVXLC.,".contains(c));
                    if roman { w.to_owned() } else { title_case(w) }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A speech of a play: its speaker tag and the byte range of what is said.
#[derive(Debug, Clone)]
struct Speech {
    speaker: String,
    start: usize,
    end: usize,
}

/// Lines of `text[a..b]` with their offsets (without the line end).
fn lines(text: &str, a: usize, b: usize) -> impl Iterator<Item = (usize, &str)> {
    let mut at = a;
    text[a..b].split_inclusive('\n').map(move |l| {
        let here = at;
        at += l.len();
        (here, l.trim_end_matches(['\n', '\r']))
    })
}

/// The speeches: paragraphs whose first line is a short speaker tag ending in `.` (`Ham.`,
/// `LADY MACBETH.`, `1 Clown.`) or in capitals (`THESEUS`), the way printed plays mark who
/// speaks. A paragraph with no tag
/// right after a stage direction that follows a speech goes on with that speech (`[Exeunt all
/// but Hamlet.]` and then the soliloquy, with no tag of its own).
fn speeches(text: &str) -> Vec<Speech> {
    /// What the paragraph before was: a speech by someone, or a stage direction after one.
    enum Before {
        Speech(String),
        Direction(String),
        Other,
    }
    let is_tag = |tag: &str| {
        let words = tag.split_whitespace().count();
        let first = tag.chars().next().unwrap_or(' ');
        // `Ham.` or `THESEUS` (some editions print tags without the period: in capitals,
        // and not a roman numeral, which numbers a sonnet, nor a song's title).
        let capitals = tag.chars().any(char::is_alphabetic)
            && tag
                .chars()
                .all(|c| c.is_uppercase() || c == ' ' || c == '\'')
            && !tag.chars().all(|c| "IVXLCDM ".contains(c))
            && !tag.contains("SONG");
        tag.len() <= 24
            && tag.len() >= 3
            && (tag.ends_with('.') || capitals)
            && words <= 3
            && first.is_alphanumeric()
            && !is_heading_line(tag)
    };
    let mut out = Vec::new();
    let mut before = Before::Other;
    let mut para: Vec<(usize, &str)> = Vec::new();
    let mut flush = |para: &mut Vec<(usize, &str)>, before: &mut Before| {
        let Some(&(_, first)) = para.first() else {
            return;
        };
        let (last_at, last) = para[para.len() - 1];
        let first = first.trim();
        let direction = first.starts_with('[') && last.trim().trim_end_matches('.').ends_with(']');
        *before = if para.len() >= 2 && is_tag(first) {
            let speaker = first.trim_end_matches('.').trim().to_owned();
            out.push(Speech {
                speaker: speaker.clone(),
                start: para[1].0,
                end: last_at + last.len(),
            });
            Before::Speech(speaker)
        } else if direction {
            // What follows a song's title is sung, often by someone else (`[ARIEL'S SONG.]`
            // after Prospero speaks): not the speech going on. A singer who falls asleep
            // (`[Lucius plays and sings till he falls asleep.]`) leaves the speech to go on.
            let lower = para.iter().map(|l| l.1).collect::<String>().to_lowercase();
            let song = lower.contains("song");
            match std::mem::replace(before, Before::Other) {
                Before::Speech(who) | Before::Direction(who) if !song => Before::Direction(who),
                _ => Before::Other,
            }
        } else if first.starts_with('[')
            && first.find(']').is_some_and(|j| {
                !first[j + 1..].trim().is_empty()
                    || para.get(1).is_some_and(|l| {
                        !is_tag(l.1.trim()) && !first.to_lowercase().contains("song")
                    })
            })
            && let Before::Speech(who) | Before::Direction(who) =
                std::mem::replace(before, Before::Other)
            && let Some(speech) = out.last_mut()
        {
            // Words after a direction that opens the paragraph are the speaker's still
            // (Emilia's `[Sings.] "Willow, willow, willow."`), and so may the lines after it be,
            // on its line or the next (`[Exit Messala.]` and then Titinius alone).
            speech.end = last_at + last.len();
            Before::Direction(who)
        } else if let Before::Direction(who) = std::mem::replace(before, Before::Other)
            && !is_tag(first)
            && !is_heading_line(first)
            && let Some(speech) = out.last_mut()
        {
            // The speech goes on across the direction (which `sentences` leaves out).
            speech.end = last_at + last.len();
            Before::Speech(who)
        } else {
            Before::Other
        };
        para.clear();
    };
    for (at, line) in lines(text, 0, text.len()) {
        if line.trim().is_empty() {
            flush(&mut para, &mut before);
        } else {
            para.push((at, line));
        }
    }
    flush(&mut para, &mut before);
    out
}

/// Whether the last entrance in `lead` brings on `speaker` and no one else: `[Enter Othello.]`,
/// `[Enter Edmund with a letter.]` for `Edm.`, not `[Enter Lear and Fool.]` or `[Enter Lear, Kent,
/// and Fool.]`.
fn enters_alone(lead: &str, speaker: &str) -> bool {
    let Some(at) = lead.rfind("[Enter ") else {
        return false;
    };
    let rest = &lead[at + "[Enter ".len()..];
    let direction = &rest[..rest.find(']').unwrap_or(rest.len())];
    let tag = speaker
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches('.')
        .to_lowercase();
    let first = direction
        .split(|c: char| !c.is_alphabetic())
        .next()
        .unwrap_or("")
        .to_lowercase();
    let others = direction.contains(" and ")
        || direction.contains(',') && {
            // `Othello, with a light` is one person; `Lear, Kent` is two.
            let after = direction.split(',').nth(1).unwrap_or("").trim_start();
            after.starts_with(|c: char| c.is_uppercase())
        };
    tag.len() >= 3 && first.starts_with(&tag) && !others
}

/// Powers a speech may call on that no one on stage answers for: the winds, nature, the
/// heavens, night. A speech that opens by addressing one (`Blow, winds, and crack your
/// cheeks!`, `O you gods!`) is spoken past whoever is present, as a soliloquy is.
const ABSENT: &[&str] = &[
    "winds", "wind", "nature", "heavens", "heaven", "gods", "night", "day", "sun", "moon", "stars",
    "earth", "sea", "spirits", "fortune", "death", "sleep", "thunder", "storm", "elements",
    "powers", "fates",
];

/// Whether `opening` (a speech's first sentence) addresses one of the [`ABSENT`] powers among
/// its first six words: the word set off by a comma or an exclamation, or after `O`, `you`,
/// `ye` or `thou` (`O you gods!`, `Thou, nature, art my goddess`).
fn calls_on_absent(opening: &str) -> bool {
    let words: Vec<&str> = opening.split_whitespace().take(6).collect();
    words.iter().enumerate().any(|(i, w)| {
        let bare = w
            .trim_matches(|c: char| !c.is_alphabetic())
            .to_ascii_lowercase();
        if !ABSENT.contains(&bare.as_str()) {
            return false;
        }
        let set_off = w.ends_with([',', '!', ';']);
        let called = i > 0 && {
            let before = words[i - 1]
                .trim_matches(|c: char| !c.is_alphabetic())
                .to_ascii_lowercase();
            matches!(before.as_str(), "o" | "you" | "ye" | "thou") || words[i - 1].ends_with(',')
        };
        set_off && called
    })
}

/// Speeches after which a character neither seen to speak nor to enter is taken to have left.
const STALE: usize = 20;

/// Whether each speech starts with its speaker alone on stage, by following the play's
/// directions: a scene heading empties the stage, `[Enter ...]` brings on whom it names, `[Exit
/// ...]` / `[Exeunt ...]` takes off whom it names (a bare `[Exit.]` its speaker, a bare
/// `[Exeunt.]` everyone, `[Exeunt all but Hamlet.]` all others), and whoever speaks is there.
/// Judged at the first quarter of the speech, where a soliloquy's "Now I am alone" falls. A
/// name the directions use is matched to a speaker tag (`Gloster` to `Glou.`, `First Player`
/// to `I Play.`); one that matches none (`Attendants`) is not followed, so an exit alone does
/// not make a soliloquy: Lear's "darker purpose" follows `[Exeunt Gloster and Edmund.]` with
/// the court still on stage.
fn alone_on_stage(
    text: &str,
    speeches: &[Speech],
    personae: &[Persona],
    cast: &HashMap<String, usize>,
) -> Vec<bool> {
    let mut tags: Vec<&str> = speeches.iter().map(|s| s.speaker.as_str()).collect();
    tags.sort_unstable();
    tags.dedup();
    let lower: Vec<String> = tags.iter().map(|t| t.to_lowercase()).collect();
    let names: Vec<Option<&str>> = tags
        .iter()
        .map(|t| {
            cast.get(*t)
                .and_then(|&i| personae.get(i))
                .or_else(|| persona_for(t, personae))
                .map(|p| p.name.as_str())
        })
        .collect();
    // The tags a name in a direction stands for: the best match, or all that match it equally
    // (`Senators` for `First Senator` and `Second Senator`).
    let tags_of = |phrase: &str| -> Vec<usize> {
        let p = phrase.to_lowercase();
        let p = p.strip_prefix("the ").unwrap_or(&p);
        let last = |s: &str| s.rsplit(' ').next().unwrap_or("").to_owned();
        let common =
            |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
        let scored: Vec<(usize, usize)> = (0..tags.len())
            .filter_map(|i| {
                let t = &lower[i];
                let score = if p == *t || t.len() >= 3 && p.starts_with(t.as_str()) {
                    100 + t.len()
                } else if names[i].is_some_and(|n| n == p || n.split(' ').any(|w| w == p)) {
                    90
                } else if last(t).len() >= 3 && last(p).starts_with(&last(t)) {
                    80
                } else {
                    let cp = common(t, p);
                    if cp >= 3 && cp * 4 >= t.chars().count() * 3 {
                        cp
                    } else {
                        0
                    }
                };
                (score > 0).then_some((score, i))
            })
            .collect();
        let best = scored.iter().map(|s| s.0).max().unwrap_or(0);
        scored
            .into_iter()
            .filter(|s| s.0 == best)
            .map(|s| s.1)
            .collect()
    };
    // The people a direction names: its comma-, `and`- or `with`-separated parts that start
    // with a capital, each up to its first word in lower case (`Kent, disguised`).
    let named = |rest: &str| -> Vec<usize> {
        rest.split([',', ';'])
            .flat_map(|p| p.split(" and "))
            .flat_map(|p| p.split(" with "))
            .filter_map(|p| {
                let p = p
                    .trim()
                    .trim_start_matches("the ")
                    .trim_start_matches("The ");
                let words: Vec<&str> = p
                    .split_whitespace()
                    .take_while(|w| w.starts_with(|c: char| c.is_uppercase() || c.is_ascii_digit()))
                    .collect();
                (!words.is_empty()).then(|| tags_of(&words.join(" ").replace('.', "")))
            })
            .flatten()
            .collect()
    };
    // Who is on stage, with the speech they were last seen by (spoke or entered before).
    let mut on: HashMap<usize, usize> = HashMap::new();
    let mut last: Option<usize> = None;
    // Applies the directions (and, outside speeches, the headings) of `text[a..b]`.
    let apply = |a: usize,
                 b: usize,
                 headings: bool,
                 on: &mut HashMap<usize, usize>,
                 last: Option<usize>,
                 now: usize| {
        for (_, line) in lines(text, a, b) {
            if headings && is_heading_line(line) {
                on.clear();
                continue;
            }
            let mut rest = line;
            while let Some(i) = rest.find('[') {
                let inner = &rest[i + 1..];
                let end = inner.find(']').unwrap_or(inner.len());
                let d = inner[..end].trim().trim_end_matches('.');
                rest = &inner[end..];
                let (verb, after) = d.split_once(' ').unwrap_or((d, ""));
                match verb.to_lowercase().as_str() {
                    "enter" | "re-enter" | "reenter" => {
                        on.extend(named(after).into_iter().map(|t| (t, now)));
                    }
                    "exit" | "exeunt" => {
                        let al = after.to_ascii_lowercase();
                        if let Some(k) = ["all but ", "all except ", "all, but "]
                            .iter()
                            .find_map(|k| al.find(k).map(|j| j + k.len()))
                        {
                            on.retain(|t, _| named(&after[k..]).contains(t));
                        } else {
                            let who = named(after);
                            // `[Exeunt Duke, Senators, Officers, &c.]`: whoever the `&c.` is,
                            // the stage empties (those who stay speak again, and are back).
                            let others = al.contains("&c") || al.contains("others");
                            if !who.is_empty() && !others {
                                for w in who {
                                    on.remove(&w);
                                }
                            } else if verb.eq_ignore_ascii_case("exit") {
                                if let Some(l) = last {
                                    on.remove(&l);
                                }
                            } else {
                                on.clear();
                            }
                        }
                    }
                    "dies" => {
                        if let Some(l) = last {
                            on.remove(&l);
                        }
                    }
                    _ => {}
                }
            }
        }
    };
    let mut out = Vec::with_capacity(speeches.len());
    let (mut at, mut prev_end) = (0, 0);
    for (i, s) in speeches.iter().enumerate() {
        let who = tags.binary_search(&s.speaker.as_str()).ok();
        // The rest of the speech before (its directions only), then what lies between.
        if at < prev_end {
            apply(at, prev_end, false, &mut on, last, i);
        }
        apply(prev_end.max(at), s.start, true, &mut on, last, i);
        last = who;
        // A joint tag (`Ros. and Guil.`) speaks for people followed by their own names.
        if !s.speaker.contains(" and ") {
            on.extend(who.map(|t| (t, i)));
        }
        let quarter = boundary(text, s.start + (s.end - s.start) / 4);
        apply(s.start, quarter, false, &mut on, last, i);
        // Minor characters often leave with no direction (a messenger, a sailor): one not
        // seen for `STALE` speeches is taken to have gone.
        out.push(
            on.iter()
                .all(|(&t, &seen)| Some(t) == who || i - seen > STALE),
        );
        at = quarter;
        prev_end = s.end;
    }
    out
}

/// `ACT II.`, `Scene I. A room.`: a play's headings, never a speaker or a speech.
fn is_heading_line(line: &str) -> bool {
    let l = line.trim().to_lowercase();
    l.starts_with("act ") || l.starts_with("scene") || l.starts_with('#')
}

/// Sentences of `text[a..b]`: they end at `.`, `!` or `?` before whitespace, at a blank line
/// or at a list item, table row or heading; in a play (`stage`) bracketed stage directions are
/// left out.
fn sentences(text: &str, a: usize, b: usize, stage: bool) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut push = |s: usize, e: usize| {
        let raw = &text[s..e];
        let lead = raw.len() - raw.trim_start().len();
        let mut s = s + lead;
        let t = text[s..e].trim_end();
        let mut e = s + t.len();
        // A list marker or quote mark of Markdown is not part of the sentence.
        for marker in ["- ", "* ", "> "] {
            if text[s..e].starts_with(marker) {
                s += marker.len();
            }
        }
        // Nor the end of the sentence a direction cut (`Why, there then [falls on his
        // sword]!--thus do I escape`).
        while s < e && text[s..e].starts_with([' ', '!', '?', '-', ',', ';', ':', '.']) {
            s += 1;
        }
        // Nor this edition's dashes after its end (`Thou shouldst not scape me here.--`).
        while e > s && (text[s..e].ends_with(['\n', '\r', ' ']) || text[s..e].ends_with("--")) {
            e -= if text[s..e].ends_with("--") { 2 } else { 1 };
        }
        if e > s {
            out.push((s, e));
        }
    };
    let mut s = a;
    let mut i = a;
    while i < b {
        let c = bytes[i];
        if stage && c == b'[' {
            push(s, i);
            i = text[i..b].find(']').map_or(b, |j| i + j + 1);
            s = i;
            continue;
        }
        if c == b'\n' {
            // A boundary line: blank, or a list item, table row, heading or fence.
            let next = text[i + 1..b].trim_start_matches([' ', '\t']);
            let item = ["- ", "* ", "+ ", "|", "#", "```", "~~~", ">", "\n", "\r"]
                .iter()
                .any(|m| next.starts_with(m))
                || next.starts_with(|c: char| c.is_ascii_digit())
                    && next.split_once(". ").is_some_and(|(n, _)| {
                        n.len() <= 2 && n.chars().all(|c| c.is_ascii_digit())
                    });
            if item {
                push(s, i);
                s = i + 1;
            }
            i += 1;
            continue;
        }
        // In verse a lower-case word after `!` or `?` goes on with the sentence (`Kent
        // banish'd thus! and France in choler parted!`, `crack your cheeks! rage! blow!`).
        let goes_on = || {
            stage
                && c != b'.'
                && text[i + 1..b]
                    .trim_start()
                    .starts_with(|ch: char| ch.is_lowercase())
        };
        if matches!(c, b'.' | b'!' | b'?')
            && (i + 1 >= b || bytes[i + 1].is_ascii_whitespace())
            && !goes_on()
        {
            push(s, i + 1);
            s = i + 1;
        }
        i += 1;
    }
    push(s, b);
    out
}

/// The last sentence `r` of a speech from after its last break (`Farewell, good
/// Strato.--Caesar, now be still: ...`), when that says something: the words one dies on,
/// not the sentence's opening.
fn dying_words(text: &str, mut r: (usize, usize)) -> (usize, usize) {
    if let Some(j) = ["!--", ".--", "?--"]
        .iter()
        .filter_map(|b| text[r.0..r.1].rfind(b).map(|j| r.0 + j + b.len()))
        .max()
    {
        let from = j + (text[j..r.1].len() - text[j..r.1].trim_start().len());
        if word_count(text, (from, r.1)) >= 4 {
            r.0 = from;
        }
    }
    r
}

/// Where the quote `r` may start so that it holds at most `max` words: its start, or the
/// first of its clauses (after `--`, `:`, `;`, `!` or `?`) from which on it does; `None`
/// when not even its last clause is that short.
fn clause_tail(text: &str, r: (usize, usize), max: usize) -> Option<usize> {
    if word_count(text, r) <= max {
        return Some(r.0);
    }
    let bytes = text.as_bytes();
    (r.0 + 1..r.1)
        .filter(|&i| {
            let prev = bytes[i - 1];
            !bytes[i].is_ascii_whitespace()
                && bytes[i] != b'-'
                && (prev == b'-' && i >= 2 && bytes[i - 2] == b'-'
                    || prev.is_ascii_whitespace() && {
                        let before = text[r.0..i].trim_end();
                        before.ends_with([':', ';', '!', '?']) || before.ends_with("--")
                    })
        })
        .find(|&i| word_count(text, (i, r.1)) <= max)
}

/// `at`, moved back to the start of the character it falls in.
fn boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Words in a range.
fn word_count(text: &str, (a, b): (usize, usize)) -> usize {
    text[a..b].split_whitespace().count()
}

/// Whether `at` ends a line of verse: a line break after a short line (prose wrapped at a
/// fixed width breaks anywhere, verse at the end of a metrical line).
fn verse_line_end(text: &str, at: usize) -> bool {
    let rest = &text[at..];
    if !rest.starts_with(['\n', '\r']) {
        return false;
    }
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    at - start <= 60
}

/// The range shown for a sentence: whole when it has at most `max` words, else cut at the last
/// clause end (`,` `;` `:` `!` `?` `--` or a verse line end) within `max` words, or after `max`
/// words. The bool says it was cut.
pub(crate) fn abridge(text: &str, (a, b): (usize, usize), max: usize) -> ((usize, usize), bool) {
    if word_count(text, (a, b)) <= max {
        return ((a, b), false);
    }
    let bytes = text.as_bytes();
    let (mut words, mut strong, mut weak, mut hard) = (0, None, None, b);
    let mut i = a;
    while i < b {
        while i < b && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b {
            break;
        }
        let w0 = i;
        while i < b && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let w = &text[w0..i];
        words += 1;
        if words >= 5 {
            // A colon after a word that points ahead is a lead-in ("Therefore I will, sir,
            // thus:"), not a thought to end on.
            let ahead = w.strip_suffix(':').is_some_and(|b| {
                [
                    "thus",
                    "this",
                    "these",
                    "follows",
                    "following",
                    "say",
                    "says",
                    "said",
                ]
                .contains(&b.to_lowercase().as_str())
            });
            if w.ends_with("--") {
                // Cut before this edition's dashes (`a method in't.--`, `the question:--`):
                // the `…` shown says that more follows.
                // A dash standing alone is no end of its own: the cut before stays.
                let e = w0 + w.trim_end_matches('-').len();
                if e > w0 {
                    strong = Some(e);
                }
            } else if w.ends_with([';', ':', '!', '?']) && !ahead {
                strong = Some(i);
            } else if w.ends_with([',', ':']) || verse_line_end(text, i) {
                weak = Some(i);
            }
        }
        if words == max {
            hard = i;
            break;
        }
    }
    let end = strong.or(weak);
    ((a, end.unwrap_or(hard)), true)
}

impl Work {
    /// The section a byte offset is in.
    fn section_at(&self, at: usize) -> &str {
        self.sections
            .iter()
            .find(|(_, a, b)| (*a..*b).contains(&at))
            .map_or("", |(t, _, _)| t.as_str())
    }

    /// A cited point for `text[a..b]` (abridged when long).
    fn point(
        &self,
        range: (usize, usize),
        speaker: Option<String>,
        label: Option<String>,
        score: f32,
    ) -> KeyPoint {
        let ((a, b), abridged) = abridge(&self.text, range, MAX_WORDS);
        let chunk_id = self
            .chunks
            .iter()
            .find(|(_, s, e)| (*s..*e).contains(&a))
            .map_or(0, |c| c.0);
        KeyPoint {
            text: normalized(&self.text[a..b]),
            speaker,
            label,
            abridged,
            claim: None,
            relevance: score,
            similarity: 0.0,
            citation: Citation {
                n: 0,
                document: self.document.clone(),
                title: self.title.clone(),
                section: self.section_at(a).to_owned(),
                page: None,
                start: a,
                end: b,
                chunk_id,
            },
        }
    }

    /// Top-level parts (acts, chapters, or a Markdown document's second-level sections when one
    /// title heads them all): label and byte range.
    fn parts(&self) -> Vec<(String, usize, usize)> {
        let top = |t: &str| t.split(" > ").next().unwrap_or("").to_owned();
        let tops: HashSet<String> = self
            .sections
            .iter()
            .map(|s| top(&s.0))
            .filter(|t| !t.is_empty())
            .collect();
        let depth = if tops.len() <= 1 { 2 } else { 1 };
        let mut out: Vec<(String, usize, usize)> = Vec::new();
        for (title, a, b) in &self.sections {
            let parts: Vec<&str> = title.split(" > ").collect();
            if parts.len() < depth || title.is_empty() {
                continue;
            }
            // The part's own heading, without a parenthetical (`Results (2026-11-22, ...)`).
            let label = parts[depth - 1]
                .split(" (")
                .next()
                .unwrap_or(parts[depth - 1])
                .trim()
                .to_owned();
            match out.last_mut() {
                Some(last) if last.0 == label => last.2 = *b,
                _ => out.push((label, *a, *b)),
            }
        }
        out
    }
}

/// One of the work's characters: the cast-list line that introduces them.
#[derive(Debug, Clone)]
struct Persona {
    /// The name part, lower case (`claudius`, `lady macbeth`, `duke of cornwall`).
    name: String,
    /// The first word of the description (`king` in `Claudius, King of Denmark.`).
    role: String,
    /// The titles the description gives them, lower case: its first clause and any that
    /// begins `afterwards`, when they begin with a rank (`duke of gloster`, `king richard
    /// iii` in `RICHARD, DUKE OF GLOSTER, afterwards KING RICHARD III`), which an edition may
    /// tag them by.
    titles: Vec<String>,
    /// The cast-list line, which a line naming several people gives each of them.
    line: (usize, usize),
    /// Their name in the line: who they are, where the line is shared.
    name_at: (usize, usize),
    /// Where the description begins (the line's end when there is none).
    desc_at: usize,
}

impl Persona {
    /// `Claudius`, `Lady Macbeth`.
    fn display(&self, text: &str) -> String {
        title_case(text[self.name_at.0..self.name_at.1].trim_end_matches('.'))
    }

    /// The description, lower case (`, king of denmark.`; `friends to brutus and cassius`
    /// for each of the five a line names).
    fn description(&self, text: &str) -> String {
        text[self.desc_at.min(self.line.1)..self.line.1].to_lowercase()
    }
}

/// Words written in capitals get an initial capital only (`LADY MACBETH` → `Lady Macbeth`),
/// the small words after the first none (`DUCHESS OF YORK` → `Duchess of York`).
fn title_case(name: &str) -> String {
    name.split(' ')
        .enumerate()
        .map(|(i, w)| {
            if w.chars().any(char::is_lowercase) {
                w.to_owned()
            } else if i > 0 && ["OF", "THE", "AND", "TO"].contains(&w) {
                w.to_lowercase()
            } else {
                // Each part after a period too (`M.ANTONY` → `M.Antony`).
                w.to_lowercase()
                    .split('.')
                    .map(|p| {
                        let mut c = p.chars();
                        c.next()
                            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                            .unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join(".")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where the name of a cast-list line ends: at a comma or a run of spaces (`SEXTUS POMPEIUS
/// Triumvir`, set in columns), whichever comes first.
fn name_end(line: &str) -> Option<usize> {
    match (line.find(','), line.find("  ")) {
        (Some(c), Some(s)) => Some(c.min(s)),
        (c, s) => c.or(s),
    }
}

/// The names at the head of a cast-list line that gives several people one description
/// (`LUCILIUS, TITINIUS, MESSALA, young CATO, and VOLUMNIUS, Friends`, `TRAVERS and MORTON,
/// retainers of Northumberland.`), as spans of `t`, with where the description begins; `None`
/// for a line of one. Only names set in capitals are told from a description so (`Senators`
/// may be either); a rank or a place ends them (`RICHARD, DUKE OF GLOSTER` is one man).
fn shared_line(t: &str) -> Option<(Vec<(usize, usize)>, usize)> {
    let is_name = |n: &str, first: bool| {
        let words: Vec<&str> = n.split_whitespace().collect();
        let caps =
            |w: &str| w.chars().any(char::is_alphabetic) && !w.chars().any(char::is_lowercase);
        !words.is_empty()
            && words.len() <= 3
            && n.chars()
                .all(|c| c.is_alphabetic() || matches!(c, ' ' | '.' | '\''))
            && words
                .iter()
                .all(|w| caps(w) || ["young", "old"].contains(w))
            && words
                .last()
                .is_some_and(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2)
            && !words.iter().any(|w| ["OF", "THE", "OR"].contains(w))
            && (first || !TITLES.contains(&words[0].to_lowercase().as_str()))
    };
    let mut names: Vec<(usize, usize)> = Vec::new();
    let mut desc = t.len();
    let mut start = 0;
    'clauses: for clause in t.split(',') {
        let at = start;
        start += clause.len() + 1;
        let lead = clause.len() - clause.trim_start().len();
        let body = clause.trim();
        let (body, skip) = body.strip_prefix("and ").map_or((body, 0), |b| (b, 4));
        let mut part_at = at + lead + skip;
        for part in body.split(" and ") {
            if !is_name(part, names.is_empty()) {
                desc = at + lead;
                break 'clauses;
            }
            names.push((part_at, part_at + part.len()));
            part_at += part.len() + " and ".len();
        }
    }
    (names.len() >= 2).then_some((names, desc))
}

/// Cast-list lines before the first act: `Name, description.` or a short `NAME.`, after a
/// heading that names the list (`PERSONS REPRESENTED`, `Dramatis Personae`, `Characters`)
/// when there is one, else after the title line.
fn personae(text: &str, before: usize) -> Vec<Persona> {
    let front: Vec<(usize, &str)> = lines(text, 0, before).collect();
    let heading = front.iter().position(|(_, l)| {
        let l = l.trim().to_lowercase();
        l.len() < 40
            && ["persons", "dramatis", "characters", "cast of"]
                .iter()
                .any(|w| l.starts_with(w))
    });
    let first = heading.map_or_else(
        || {
            front
                .iter()
                .position(|(_, l)| !l.trim().is_empty())
                .map_or(0, |i| i + 1)
        },
        |h| h + 1,
    );
    let mut out: Vec<Persona> = Vec::new();
    let mut before = "";
    for &(at, line) in &front[first.min(front.len())..] {
        let t = line.trim();
        let lead = line.len() - line.trim_start().len();
        // `SCENE: England` ends the list: what follows (`King Richard the Third`, the title
        // again) is no one.
        let lower = t.to_lowercase();
        if !out.is_empty()
            && lower
                .strip_prefix("scene")
                .is_some_and(|r| r.starts_with([':', '.', ',', ' ', '-', '\u{2014}']))
        {
            break;
        }
        // The rest of the entry above (`Servants to` / `Brutus`) names no one new.
        let goes_on = before.ends_with(',')
            || before
                .rsplit(' ')
                .next()
                .is_some_and(|w| ["to", "and", "of", "the", "with", "for", "or"].contains(&w));
        before = t;
        if goes_on || t.len() < 3 || t.len() > 100 || t.starts_with('[') {
            continue;
        }
        if !t.starts_with(|c: char| c.is_uppercase()) {
            continue;
        }
        let (name, desc) =
            match name_end(t).map(|i| (&t[..i], t[i..].trim_start_matches([',', ' ']))) {
                Some((n, d)) => (n, d),
                None if t.split_whitespace().count() <= 4 => (t.trim_end_matches('.'), ""),
                None => continue,
            };
        // Each person a line names has the line, their own name and the description.
        let (names, desc_at, desc) = match shared_line(t) {
            Some((names, d)) => (names, d, &t[d..]),
            None => (
                vec![(0, name.trim_end().len())],
                name_end(t).unwrap_or(t.len()),
                desc,
            ),
        };
        // A crowd (`Lords attending on the KING; Officers`, `Servants of Ventidius`) is no one.
        let first = name.split_whitespace().next().unwrap_or("").to_lowercase();
        if CROWDS.contains(&first.as_str()) {
            continue;
        }
        // Ditto marks (`CASSIUS,   "   "   "`) are no description to quote: the name alone is.
        let ditto = !desc.is_empty() && !desc.contains(char::is_alphanumeric);
        let end = if ditto {
            name.trim_end().len()
        } else {
            t.len()
        };
        let role = desc
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_matches(|c: char| !c.is_alphabetic())
            .to_lowercase();
        let titles: Vec<String> = desc
            .split([',', ';'])
            .enumerate()
            .filter_map(|(i, clause)| {
                let c = clause.trim().to_lowercase();
                let c = c
                    .strip_prefix("afterwards ")
                    .map(str::to_owned)
                    .or_else(|| (i == 0).then_some(c))?;
                let words: Vec<&str> = c
                    .split(|ch: char| !ch.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .collect();
                // A rank and what it is of (`duke of gloster`, `king richard iii`), not
                // a relation (`son to polonius`).
                let rank = words
                    .first()
                    .is_some_and(|w| TITLES.contains(w) && !["the", "and"].contains(w));
                (rank && words.len() >= 2).then(|| words.join(" "))
            })
            .collect();
        let base = at + lead;
        for (a, b) in names {
            out.push(Persona {
                name: t[a..b].trim().to_lowercase(),
                role: role.clone(),
                titles: titles.clone(),
                line: (base, base + end),
                name_at: (base + a, base + b),
                desc_at: base + desc_at,
            });
        }
    }
    out
}

/// The cast-list line for a speaker tag: the same name, else a name word the tag abbreviates
/// (`Ham` → Hamlet, `Glou` → Gloster), else a role (`King` → `Claudius, King of Denmark`).
/// Of several that fit it equally, the first: [`cast_of`] tells them apart by the play's
/// other tags.
fn persona_for<'p>(tag: &str, ps: &'p [Persona]) -> Option<&'p Persona> {
    personae_for(tag, ps).into_iter().next()
}

/// The cast-list lines that fit a tag best ([`persona_for`]), in cast order: more than one
/// when a name word the tag abbreviates begins several names (`Cor.` for Cordelia and
/// Cornwall).
fn personae_for<'p>(tag: &str, ps: &'p [Persona]) -> Vec<&'p Persona> {
    let t = tag.to_lowercase();
    // Two of one name (`RICHARD, DUKE OF YORK` and `RICHARD, DUKE OF GLOSTER`): both.
    let same: Vec<&Persona> = ps.iter().filter(|p| p.name == t).collect();
    if !same.is_empty() {
        return same;
    }
    // A tag of two words or more that begins a name (`KING HENRY.` for `KING HENRY V.`).
    if t.contains(' ')
        && let Some(p) = ps.iter().find(|p| p.name.starts_with(&format!("{t} ")))
    {
        return vec![p];
    }
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    // A name word the tag abbreviates; a rank (`prince`, `king`) only after the roles: in
    // `PRINCE.` Henry IV's tag is Henry, Prince of Wales, not Prince John of Lancaster.
    let by_word = |titles: bool| {
        let mut best: Vec<&Persona> = Vec::new();
        let mut most = 0;
        for p in ps {
            // `m.antony` is Antony; `king-at-arms` is a rank.
            for w in p
                .name
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
                if TITLES.contains(&w) != titles {
                    continue;
                }
                let cp = common(&t, w);
                if cp < 3 || cp * 4 < t.chars().count() * 3 || cp < most {
                    continue;
                }
                if cp > most {
                    most = cp;
                    best.clear();
                }
                if !best.iter().any(|b| std::ptr::eq(*b, p)) {
                    best.push(p);
                }
            }
        }
        best
    };
    // By role (`King.` for `CLAUDIUS, King of Denmark.`) only when one character has it: five
    // are a `Son` in Macbeth. A tag in the plural (`CITIZENS.`) is a crowd, not a character.
    // A rank is a role when it is of somewhere (`King of Denmark`), not when it begins the
    // name of an office (`Polonius, Lord Chamberlain` is not the `Lord.` of Act V).
    let of_somewhere = |p: &Persona| {
        !TITLES.contains(&p.role.as_str())
            || p.titles
                .first()
                .is_some_and(|x| x.starts_with(&format!("{} of ", p.role)))
    };
    let by_role = || {
        let mut with = ps
            .iter()
            .filter(|p| !p.role.is_empty() && p.role == t && of_somewhere(p));
        match (with.next(), with.next()) {
            (Some(p), None) if !t.ends_with('s') => vec![p],
            _ => Vec::new(),
        }
    };
    // A title only one entry gives (`GLOSTER.` and, once he is king, `KING RICHARD.` for
    // `RICHARD, DUKE OF GLOSTER, afterwards KING RICHARD III`).
    let by_title = || {
        let want = format!(
            " {} ",
            t.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        );
        // A bare rank (`LORD.`) is anyone of that rank.
        if want.trim().len() < 3 || TITLES.contains(&want.trim()) {
            return Vec::new();
        }
        let mut with = ps
            .iter()
            .filter(|p| p.titles.iter().any(|x| format!(" {x} ").contains(&want)));
        match (with.next(), with.next()) {
            (Some(p), None) => vec![p],
            _ => Vec::new(),
        }
    };
    let mut found = by_word(false);
    // A place a name is of (`DUCHESS OF YORK`) may be the place of another's title too
    // (`RICHARD, DUKE OF YORK`, tagged `YORK.`): all of them fit, and [`cast_of`] gives the
    // tag to the one no other tag has (the Duchess is `DUCHESS.`).
    let of_place = format!(" of {t}");
    if !found.is_empty() && found.iter().all(|p| p.name.ends_with(&of_place)) {
        for p in ps {
            if p.titles.iter().any(|x| x.ends_with(&of_place))
                && !found.iter().any(|f| std::ptr::eq(*f, p))
            {
                found.push(p);
            }
        }
        found.sort_by_key(|f| f.line);
    }
    if found.is_empty() {
        found = by_role();
    }
    if found.is_empty() {
        found = by_word(true);
    }
    if found.is_empty() {
        found = by_title();
    }
    found
}

/// Each speaker tag's cast-list line (an index into `ps`). A tag that fits several equally
/// goes to the one no other tag fits alone: `Corn.` is Cornwall, so `Cor.` is Cordelia.
fn cast_of<'t>(tags: impl Iterator<Item = &'t str>, ps: &[Persona]) -> HashMap<String, usize> {
    let index = |p: &Persona| ps.iter().position(|q| std::ptr::eq(p, q));
    let fits: Vec<(String, Vec<usize>)> = tags
        .map(|t| {
            let found = personae_for(t, ps).into_iter().filter_map(index).collect();
            (t.to_owned(), found)
        })
        .collect();
    let alone: HashSet<usize> = fits
        .iter()
        .filter(|f| f.1.len() == 1)
        .map(|f| f.1[0])
        .collect();
    let mut out = HashMap::new();
    for (tag, found) in fits {
        let free: Vec<usize> = found
            .iter()
            .copied()
            .filter(|i| !alone.contains(i))
            .collect();
        let chosen = match free.as_slice() {
            [one] if found.len() > 1 => Some(*one),
            _ => found.first().copied(),
        };
        if let Some(i) = chosen {
            out.insert(tag, i);
        }
    }
    out
}

/// The words of a name that tell who (`hamlet`, `ghost`, `father` in `Ghost of Hamlet's
/// Father`), lower case, without ranks, short words and a possessive `'s`.
fn name_words(name: &str) -> Vec<String> {
    name.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| {
            let w = w.to_lowercase();
            w.strip_suffix("'s")
                .unwrap_or(&w)
                .trim_matches('\'')
                .to_owned()
        })
        .filter(|w| w.len() >= 3 && !TITLES.contains(&w.as_str()))
        .collect()
}

/// The first words of a cast-list line that lists a crowd, not a character.
const CROWDS: &[&str] = &[
    "lords",
    "ladies",
    "servants",
    "senators",
    "officers",
    "attendants",
    "citizens",
    "knights",
    "soldiers",
    "messengers",
    "gentlemen",
    "musicians",
    "players",
    "sailors",
    "courtiers",
    "fairies",
    "spirits",
    "tribunes",
    "watchmen",
    "guards",
    "other",
    "several",
];

/// Literary themes and the words that signal them; which ones a work has is decided by counting
/// them against the collection's other works.
const THEMES: &[(&str, &str)] = &[
    ("Revenge", "revenge revenged vengeance avenge"),
    ("Madness", "mad madness madman lunacy insane distracted"),
    (
        "Death and mortality",
        "death die dies dead grave skull mortal dust",
    ),
    ("Ambition", "ambition ambitious"),
    (
        "Guilt and conscience",
        "guilt guilty conscience sin remorse",
    ),
    ("Jealousy", "jealous jealousy suspicion"),
    ("Love", "love lover beloved"),
    (
        "Honesty and deception",
        "honest honesty lie false deceive villain",
    ),
    ("Power and kingship", "king crown throne majesty royal"),
    ("Fate and prophecy", "fate fortune prophecy destiny stars"),
    ("Family", "father mother daughter son brother sister"),
    (
        "Loyalty and betrayal",
        "loyal loyalty traitor treason betray",
    ),
    ("Nature", "nature natural unnatural"),
    ("Justice", "justice law judge"),
    ("War and honour", "war battle soldier honour honor"),
    ("Fear", "fear afraid terror"),
    ("Sleep and dreams", "sleep dream dreams"),
    ("Heaven and hell", "heaven hell damned soul"),
    ("Old age", "old age aged"),
    ("Sight and blindness", "eyes blind sight"),
];

/// Whether `w` names a theme whose words are `words`: it has a theme word's stem and is no
/// shorter, or is its singular (`eye` for `eyes`). The stem of `fate` is `fat`, and "Grew fat
/// with feasting" is not about fate.
fn names_theme(w: &str, words: &str) -> bool {
    let (k, lower) = (key(w), w.to_lowercase());
    words.split(' ').any(|t| {
        key(t) == k && (lower.len() >= t.len() || lower.starts_with(t.trim_end_matches('s')))
    })
}

/// Stems of what happens in a story (deaths, plots, marriages, partings), as [`key`] makes them:
/// a play's plot slide prefers the lines that report such things. Errands and set-ups (a letter
/// sent, a battle to come) are not among them: "Before you fight the battle, ope this letter"
/// tells less than "The one the other poisoned for my sake, And after slew herself".
static EVENTS: LazyLock<HashSet<String>> = LazyLock::new(|| {
    "murder murdered kill killed slain slay slew dies died poison poisoned drowned stabbed \
     wounded ghost revenge married wedding banished exile fled flee escape duel crowned \
     betrayed plot traitor treason prisoner arrested buried mad"
        .split_whitespace()
        .map(key)
        .collect()
});

/// What a stage direction shows happening to a body: a death, a blow, a fight, a binding.
/// The line spoken just before such a direction is the moment itself ("O, I am slain!",
/// "Out, vile jelly!"), which no word count finds: the plot slide prefers it.
const DEEDS: &[&str] = &[
    "die",
    "dies",
    "dead",
    "kill",
    "kills",
    "stab",
    "stabs",
    "slay",
    "slays",
    "fight",
    "fights",
    "fighting",
    "wound",
    "wounds",
    "smother",
    "smothers",
    "strangle",
    "strangles",
    "poison",
    "poisons",
    "tears out",
    "puts out",
    "plucks",
    "bind",
    "binds",
    "seize",
    "seizes",
    "hang",
    "hangs",
    "falls",
];

/// Whether a stage direction (lower case) shows a death: one dies or is slain (`Falls and
/// dies.`, `young Seward is slain`), or kills themself (`Stabs himself.`).
fn is_death(direction: &str) -> bool {
    let words: Vec<&str> = direction
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |ws: &[&str]| words.iter().any(|w| ws.contains(w));
    has(&["dies", "die", "dead", "slain"])
        || has(&["stabs", "stab", "kills", "kill"]) && has(&["himself", "herself"])
}

/// Where the stage direction whose `[` is at `at` ends, its `]` included: at a blank line
/// when the edition left it open (Macbeth's `[Retreat. Flourish. Enter, with drum and
/// colours, ...`), which would otherwise take in the scene after it.
fn direction_end(text: &str, at: usize) -> usize {
    let rest = &text[at..];
    let shut = rest.find(']').map_or(rest.len(), |j| j + 1);
    at + rest.find("\n\n").map_or(shut, |b| b.min(shut))
}

/// What the stage direction whose `[` is at `at` says, without its brackets.
fn direction(text: &str, at: usize) -> &str {
    text[at + 1..direction_end(text, at)].trim_end_matches(']')
}

/// Where each of the play's stage directions that shows a deed ([`DEEDS`]) begins.
fn deeds(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find('[') {
        let at = from + i;
        let end = direction_end(text, at);
        let d = direction(text, at).to_lowercase();
        let words: Vec<&str> = d
            .split(|c: char| !c.is_alphabetic())
            .filter(|w| !w.is_empty())
            .collect();
        let joined = words.join(" ");
        let shown = DEEDS.iter().any(|k| {
            if k.contains(' ') {
                joined.contains(k)
            } else {
                words.contains(k)
            }
        });
        // An entrance or exit only brings or bears people ("bearing off the dead bodies"),
        // unless they go fighting (`Exeunt fighting.`: the last words before it are the
        // fight's, Macbeth's "lay on, Macduff").
        let moves = ["enter", "exit", "exeunt"].iter().any(|m| d.starts_with(m))
            && !words.contains(&"fighting");
        if shown && !moves {
            out.push(at);
        }
        from = end.max(at + 1);
    }
    out
}

/// Words of a direction too common to tie a line to it.
const ECHO_STOP: &[&str] = &[
    "the", "and", "his", "her", "him", "them", "with", "from", "their", "one", "other", "off",
    "into", "upon", "down", "that", "then",
];

/// Words of a cast-list name that are ranks, not who (`duke of cornwall` is `cornwall`).
const TITLES: &[&str] = &[
    "the", "and", "duke", "earl", "lord", "lady", "king", "queen", "prince", "sir", "first",
    "second", "third",
];

/// What a line said as a deed is done adds to its plot score (an event word adds 0.8).
const DEED_WEIGHT: f32 = 0.8;

/// Words that mark something left open in a technical text.
const OPEN: &[&str] = &[
    "not yet",
    "not measured",
    "not done",
    "next:",
    "next,",
    "todo",
    "open question",
    "unclear",
    "unknown",
    "remains",
    "remaining",
    "still ",
    "future",
    "not met",
];

/// How a candidate sentence (its range and speaker) is scored for a facet.
type Score<'a> = dyn Fn((usize, usize), Option<&str>) -> f32 + 'a;

/// What the facets are built from, computed once.
struct Analysis<'w> {
    work: &'w Work,
    speeches: Vec<Speech>,
    personae: Vec<Persona>,
    /// Each speaker tag's cast-list line, an index into `personae` ([`cast_of`]).
    cast: HashMap<String, usize>,
    parts: Vec<(String, usize, usize)>,
    /// Speaker tags by words spoken, most first.
    main: Vec<String>,
    /// Lower-case names the main characters go by (tags and cast-list names).
    names: HashSet<String>,
    used: HashSet<(usize, usize)>,
    /// Where the directions that show a deed are, in order ([`deeds`]).
    deeds: Vec<usize>,
    play: bool,
    /// Counts over all parts, computed once (every part is compared against them).
    whole: std::sync::OnceLock<Counts>,
    /// Who picks the best-known among the set pieces found, and where in them to quote.
    reader: Option<&'w dyn Reader>,
}

impl<'w> Analysis<'w> {
    fn new(work: &'w Work) -> Self {
        let text = &work.text;
        let speeches = speeches(text);
        let mut parts = work.parts();
        let acts: Vec<_> = parts
            .iter()
            .filter(|p| p.0.to_lowercase().starts_with("act"))
            .cloned()
            .collect();
        if acts.len() >= 2 {
            parts = acts;
        }
        if parts.is_empty() {
            parts.push((work.title.clone(), 0, text.len()));
        }
        let first = parts.first().map_or(text.len(), |p| p.1);
        let personae = personae(text, first);
        // The front matter (title, cast list) is not dialogue, whatever its lines look like.
        let mut speeches = speeches;
        if first < text.len() {
            speeches.retain(|s| s.start >= first);
        }
        let mut words: HashMap<&str, usize> = HashMap::new();
        for s in &speeches {
            *words.entry(&s.speaker).or_default() += word_count(text, (s.start, s.end));
        }
        let mut main: Vec<(&str, usize)> = words
            .into_iter()
            .filter(|(t, _)| !matches!(t.to_lowercase().as_str(), "all" | "both"))
            .collect();
        main.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let main: Vec<String> = main.into_iter().map(|m| m.0.to_owned()).collect();
        let cast = cast_of(main.iter().map(String::as_str), &personae);
        let mut names = HashSet::new();
        for tag in main.iter().take(7) {
            names.insert(tag.to_lowercase());
            if let Some(p) = cast.get(tag).map(|&i| &personae[i]) {
                names.extend(p.name.split_whitespace().map(str::to_owned));
            }
        }
        let from = parts.first().map_or(0, |p| p.1);
        let spoken: usize = speeches.iter().map(|s| s.end - s.start).sum();
        // A play: speeches by at least three speakers make up most of what follows the front
        // matter.
        let play = main.len() >= 3 && spoken * 2 >= text.len().saturating_sub(from);
        Analysis {
            work,
            speeches,
            personae,
            cast,
            parts,
            main,
            names,
            used: HashSet::new(),
            deeds: if play { deeds(text) } else { Vec::new() },
            play,
            whole: std::sync::OnceLock::new(),
            reader: None,
        }
    }

    fn with_reader(mut self, reader: Option<&'w dyn Reader>) -> Self {
        self.reader = reader;
        self
    }

    /// Where the cast-list entry `q` comes among the speakers by words spoken (0: most;
    /// `usize::MAX` for one who never speaks).
    fn speaking_rank(&self, q: &Persona) -> usize {
        self.main
            .iter()
            .position(|t| self.persona(t).is_some_and(|x| x.name_at == q.name_at))
            .unwrap_or(usize::MAX)
    }

    fn is_play(&self) -> bool {
        self.play
    }

    /// The cast-list line of a speaker tag.
    fn persona(&self, tag: &str) -> Option<&Persona> {
        match self.cast.get(tag) {
            Some(&i) => self.personae.get(i),
            None => persona_for(tag, &self.personae),
        }
    }

    fn text(&self) -> &'w str {
        &self.work.text
    }

    /// How a speaker is shown: the cast list's name, else the tag (`SECOND WITCH` → `Second
    /// Witch`).
    fn speaker_name(&self, tag: &str) -> String {
        self.persona(tag)
            .map_or_else(|| title_case(tag), |p| p.display(self.text()))
    }

    fn is_main(&self, tag: &str) -> bool {
        self.main.iter().take(6).any(|m| m == tag)
    }

    /// Whether a speaker is the one the play is named for (`Lear` in `THE TRAGEDY OF KING
    /// LEAR`, `Ham` in `HAMLET, PRINCE OF DENMARK`; by tag or cast-list name, not by role, so
    /// not Claudius, `King of Denmark`).
    fn is_title_role(&self, tag: &str) -> bool {
        let title = self.work.title.to_lowercase();
        let words: Vec<&str> = title
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let t = tag.to_lowercase();
        let name = self
            .persona(tag)
            .map(|p| p.name.split_whitespace().next().unwrap_or("").to_owned());
        self.is_main(tag)
            && words.iter().any(|w| {
                *w == t || t.len() >= 3 && w.starts_with(t.as_str()) || name.as_deref() == Some(*w)
            })
    }

    /// Whether a deed's `direction` is done by or to the speaker `tag`: it names them (by tag
    /// or cast-list name) or starts with the deed itself (`Dies.`, `He dies.`).
    fn does(&self, tag: &str, direction: &str) -> bool {
        let d = direction.trim().to_lowercase();
        let first = d
            .split(|c: char| !c.is_alphabetic())
            .find(|w| !w.is_empty())
            .unwrap_or("");
        // Only a death has the speaker for its subject unnamed: one who falls or wounds may
        // be anyone (Cassio falls, wounded by another).
        let verb = |w: &str| matches!(w, "dies" | "die" | "stabs" | "kills");
        if verb(first)
            || matches!(first, "he" | "she")
                && d.split(' ')
                    .nth(1)
                    .is_some_and(|w| verb(w.trim_matches(|c: char| !c.is_alphabetic())))
        {
            return true;
        }
        // Or the death comes after what they do first, no one else named before it (`Falls
        // and dies.`, `Falls on Romeo's body and dies.`, not `Clifford groans and dies.`).
        let clause = direction.trim().split('.').next().unwrap_or("");
        let words: Vec<&str> = clause
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphabetic() && c != '\''))
            .collect();
        if let Some(i) = words.iter().position(|w| *w == "dies") {
            let named =
                |w: &&str| w.chars().next().is_some_and(char::is_uppercase) && !w.ends_with("'s");
            // `He runs on his sword, and dies.`: the verb after the pronoun.
            let from = usize::from(matches!(words.first(), Some(&("He" | "She"))));
            let lead = words.get(from).copied().unwrap_or("");
            let verb = lead.len() > 3
                && lead.ends_with('s')
                && lead.chars().skip(1).all(char::is_lowercase)
                && self.persona(lead).is_none();
            if i > from && verb && !words[from + 1..i].iter().any(named) {
                return true;
            }
        }
        self.named_by(tag, &d)
    }

    /// Whether the lower-case `direction` names the speaker `tag`, by tag or cast-list name.
    fn named_by(&self, tag: &str, direction: &str) -> bool {
        let t = tag.trim_end_matches('.').to_lowercase();
        let mut names: Vec<String> = self
            .persona(tag)
            .map(|p| {
                p.name
                    .split_whitespace()
                    .filter(|w| w.len() >= 3 && !TITLES.contains(w))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if t.len() >= 3 {
            names.push(t);
        }
        direction
            .split(|c: char| !c.is_alphabetic())
            .filter(|w| w.len() >= 3)
            .any(|w| names.iter().any(|n| w == n || w.starts_with(n.as_str())))
    }

    /// The first direction showing a deed after byte `end`, with what it says, when at most
    /// 12 words come between (counted only that far: the next deed may be acts away).
    fn deed_after(&self, end: usize) -> Option<(usize, &'w str)> {
        let text = self.text();
        let at = *self.deeds.get(self.deeds.partition_point(|&at| at < end))?;
        text[end..at]
            .split_whitespace()
            .nth(12)
            .is_none()
            .then(|| (at, direction(text, at)))
    }

    fn names_main(&self, range: (usize, usize)) -> bool {
        tokens(&self.text()[range.0..range.1]).any(|w| self.names.contains(&w.to_lowercase()))
    }

    /// The sentences of the speeches inside `range`, each with its speech.
    fn spoken(&self, range: (usize, usize)) -> impl Iterator<Item = ((usize, usize), &Speech)> {
        let text = self.text();
        self.speeches
            .iter()
            .filter(move |s| s.start >= range.0 && s.end <= range.1)
            .flat_map(move |s| {
                sentences(text, s.start, s.end, true)
                    .into_iter()
                    .map(move |r| (r, s))
            })
    }

    /// Sentences to quote inside `range`, with their speaker: from speeches in a play, from the
    /// whole text otherwise (skipping code, tables, headings and lead-ins ending in `:`).
    fn candidates(&self, range: (usize, usize)) -> Vec<((usize, usize), Option<String>)> {
        let text = self.text();
        let mut out = Vec::new();
        if self.is_play() {
            out.extend(
                self.spoken(range)
                    .map(|(r, s)| (r, Some(s.speaker.clone()))),
            );
            // A short speech of short sentences said as a deed is done is one line to quote
            // ("Et tu, Brute?-- Then fall, Caesar!"), though each sentence is too short alone.
            out.extend(
                self.speeches
                    .iter()
                    .filter(|s| s.start >= range.0 && s.end <= range.1)
                    .filter_map(|s| {
                        let all = sentences(text, s.start, s.end, true);
                        let whole = (all.first()?.0, all.last()?.1);
                        let short = all.iter().all(|r| word_count(text, *r) < 5);
                        let next = self.deeds.partition_point(|&at| at < whole.1);
                        let deed = self.deeds.get(next).is_some_and(|&at| {
                            text[whole.1..at].split_whitespace().nth(4).is_none()
                        });
                        (all.len() > 1 && short && deed && word_count(text, whole) <= 12)
                            .then(|| (whole, Some(s.speaker.clone())))
                    }),
            );
        } else {
            let mut fenced = false;
            let mut at = range.0;
            for (l_at, line) in lines(text, range.0, range.1) {
                let t = line.trim_start();
                if t.starts_with("```") || t.starts_with("~~~") {
                    if !fenced {
                        out.extend(
                            sentences(text, at, l_at, false)
                                .into_iter()
                                .map(|r| (r, None)),
                        );
                    }
                    fenced = !fenced;
                    at = l_at + line.len();
                }
            }
            if !fenced {
                out.extend(
                    sentences(text, at, range.1, false)
                        .into_iter()
                        .map(|r| (r, None)),
                );
            }
            // Nor a lead-in to a table, list or code ("Fan-out (same script, second run):"),
            // which says nothing without what follows.
            out.retain(|(r, _)| {
                let s = &text[r.0..r.1];
                !s.starts_with(['#', '|'])
                    && !s.contains('|')
                    && !s.contains("```")
                    && !s.ends_with(':')
            });
        }
        out
    }

    /// Words that set `range` apart from the rest of the work: `log` of how much more often a
    /// stem occurs in it, for stems it uses at least twice.
    fn distinctive(&self, range: (usize, usize)) -> HashMap<String, f32> {
        let text = self.text();
        let inside = self.counted(range);
        let all = self.whole.get_or_init(|| {
            let mut all = Counts::default();
            for p in &self.parts {
                all.merge(&self.counted((p.1, p.2)));
            }
            if all.total == 0 {
                all = Counts::of(text);
            }
            all
        });
        let rest = (all.total.saturating_sub(inside.total)).max(1) as f32;
        let n = inside.total.max(1) as f32;
        inside
            .words
            .iter()
            .filter(|(_, f)| **f >= 2)
            .filter_map(|(k, &f)| {
                let out = all.get(k).saturating_sub(f) as f32;
                let s = ((f as f32 / n) / ((out + 1.0) / rest)).ln();
                (s > 0.0).then(|| (k.clone(), s))
            })
            .collect()
    }

    /// Word counts of what is said in `range` (speeches only, in a play).
    fn counted(&self, range: (usize, usize)) -> Counts {
        let text = self.text();
        let mut c = Counts::default();
        if self.is_play() {
            for (r, _) in self.spoken(range) {
                c.add(&text[r.0..r.1]);
            }
        } else {
            c.add(&text[range.0..range.1]);
        }
        c
    }

    /// The best unused sentence of `range` by `score`, with 5 to `max_words` words.
    fn best(
        &self,
        range: (usize, usize),
        max_words: usize,
        score: &Score<'_>,
    ) -> Option<((usize, usize), Option<String>, f32)> {
        let text = self.text();
        let mut seen = HashSet::new();
        self.candidates(range)
            .into_iter()
            .filter(|(r, _)| (5..=max_words).contains(&word_count(text, *r)))
            .filter(|(r, _)| !self.is_used(*r) && seen.insert(normalized(&text[r.0..r.1])))
            .map(|(r, who)| {
                let s = score(r, who.as_deref());
                (r, who, s)
            })
            .max_by(|a, b| a.2.total_cmp(&b.2).then(b.0.0.cmp(&a.0.0)))
    }

    /// Whether `r` overlaps a line already quoted (a short speech is quoted whole or by its
    /// sentences, never both).
    fn is_used(&self, r: (usize, usize)) -> bool {
        self.used.iter().any(|u| u.0 < r.1 && r.0 < u.1)
    }

    fn take(
        &mut self,
        r: (usize, usize),
        who: Option<&str>,
        label: Option<String>,
        score: f32,
    ) -> KeyPoint {
        self.used.insert(r);
        let speaker = who.map(|t| self.speaker_name(t));
        self.work.point(r, speaker, label, score)
    }

    /// The cast-list lines of the characters who speak most.
    fn who_is_who(&mut self) -> Facet {
        let mut points = Vec::new();
        let mut lines_used = HashSet::new();
        for tag in self.main.clone() {
            if points.len() == 7 {
                break;
            }
            if let Some(p) = self.persona(&tag)
                && lines_used.insert(p.line)
            {
                let line = p.line;
                points.push(self.take(line, None, None, 1.0));
            }
        }
        if points.len() < 3 {
            // No cast list: each main speaker's first substantial line.
            points.clear();
            for tag in self.main.clone().into_iter().take(6) {
                let first = self
                    .speeches
                    .iter()
                    .filter(|s| s.speaker == tag)
                    .flat_map(|s| sentences(self.text(), s.start, s.end, true))
                    .find(|r| word_count(self.text(), *r) >= 5);
                if let Some(r) = first {
                    let name = self.speaker_name(&tag);
                    points.push(self.take(r, Some(&tag), Some(name), 1.0));
                }
            }
        }
        Facet {
            title: "Who's who".into(),
            points,
        }
    }

    /// One or more lines per part (act, section) that set it apart from the others, preferring
    /// the main characters.
    fn per_part(&mut self, parts: &[(String, usize, usize)], per: usize) -> Vec<KeyPoint> {
        let mut points = Vec::new();
        for (label, a, b) in parts {
            let d = self.distinctive((*a, *b));
            for _ in 0..per {
                let text = self.text();
                let score = |r: (usize, usize), who: Option<&str>| {
                    let ks: HashSet<String> = tokens(&text[r.0..r.1]).map(key).collect();
                    let s: f32 = ks.iter().filter_map(|k| d.get(k)).sum();
                    let mut s = (s / (word_count(text, r) as f32).sqrt()).min(1.5);
                    if who.is_some_and(|w| self.is_main(w)) {
                        s += 0.5;
                    }
                    // What happens: a line that reports a death, a plot or a marriage tells
                    // the story better than one that only sounds like its act, whoever says
                    // it (the watchman's "here lies the County Paris slain; And Romeo dead").
                    let events = ks.iter().filter(|k| EVENTS.contains(k.as_str())).count();
                    s += 0.8 * events.min(2) as f32;
                    if self.names_main(r) {
                        s += 0.5;
                    }
                    // Said as a deed is done: a direction that shows one follows the line
                    // with at most a few words between.
                    if let Some((at, direction)) = self.deed_after(r.1) {
                        s += DEED_WEIGHT;
                        // The line that names the deed it precedes ("Upon these eyes of thine
                        // I'll set my foot" before Cornwall plucks out an eye) is the moment
                        // itself, not a line said near it.
                        let next_to = text[r.1..at].split_whitespace().nth(4).is_none();
                        if next_to
                            && tokens(direction)
                                .filter(|w| {
                                    w.len() >= 3 && !ECHO_STOP.contains(&w.to_lowercase().as_str())
                                })
                                .any(|w| ks.contains(&key(w)))
                        {
                            s += DEED_WEIGHT;
                        }
                        // Said by the one who does or suffers it: the direction names the
                        // speaker, or has no subject but them (`[Dies.]` after "Et tu, Brute?--
                        // Then fall, Caesar!").
                        if next_to && who.is_some_and(|w| self.does(w, direction)) {
                            s += DEED_WEIGHT;
                        }
                    }
                    s
                };
                if let Some((r, who, s)) = self.best((*a, *b), 20, &score) {
                    points.push(self.take(r, who.as_deref(), Some(heading(label)), s));
                }
            }
        }
        points
    }

    /// Themes from [`THEMES`] the work speaks of more than the collection's other works, each
    /// with the line that names it most plainly.
    fn themes(&mut self, background: &Counts, n: usize) -> Facet {
        let mine = match self.parts.first() {
            Some(first) => self.counted((first.1, self.text().len())),
            None => Counts::of(self.text()),
        };
        let rate = |c: &Counts, keys: &[String]| {
            keys.iter().map(|k| c.get(k)).sum::<usize>() as f32 * 1e4 / c.total.max(1) as f32
        };
        let mut scored: Vec<(f32, &str, &str)> = THEMES
            .iter()
            .map(|&(name, words)| {
                let keys: Vec<String> = words.split(' ').map(key).collect();
                let count: usize = keys.iter().map(|k| mine.get(k)).sum();
                let r = rate(&mine, &keys);
                let s = if background.total == 0 {
                    r
                } else {
                    r * ((r + 1.0) / (rate(background, &keys) + 1.0)).ln()
                };
                (if count >= 5 { s } else { f32::MIN }, name, words)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let whole = (self.parts.first().map_or(0, |p| p.1), self.text().len());
        let mut points = Vec::new();
        for (_, name, words) in scored.into_iter().take_while(|t| t.0 > 0.0) {
            if points.len() == n {
                break;
            }
            let text = self.text();
            let score = |r: (usize, usize), who: Option<&str>| {
                // A line the speaker quotes from someone else (a play within the play, a
                // letter) is not how the work itself names the theme.
                let hits = tokens(&unquoted(&text[r.0..r.1]))
                    .filter(|w| names_theme(w, words))
                    .count() as f32;
                if hits == 0.0 {
                    return f32::MIN;
                }
                let mut s = hits.min(2.0);
                if who.is_some_and(|w| self.is_main(w)) {
                    s += 0.5;
                }
                if self.names_main(r) {
                    s += 0.3;
                }
                s - 0.02 * word_count(text, r) as f32
            };
            if let Some((r, who, v)) = self.best(whole, 20, &score)
                && v > f32::MIN
            {
                points.push(self.take(r, who.as_deref(), Some(name.to_owned()), v));
            }
        }
        Facet {
            title: "Main themes".into(),
            points,
        }
    }

    /// The openings of the longest speeches (soliloquies first, then set pieces), at most two
    /// per speaker besides their soliloquies, from different acts where possible.
    fn key_passages(&mut self, n: usize) -> Facet {
        Facet {
            title: "Key passages".into(),
            points: self.set_pieces(n, &|_| true),
        }
    }

    /// The openings of up to `n` set pieces among the speeches `of` accepts, in play order,
    /// labelled by their part: the key passages of the whole play, or of one character.
    fn set_pieces(&mut self, n: usize, of: &dyn Fn(&Speech) -> bool) -> Vec<KeyPoint> {
        let text = self.text();
        // A set piece is long, spoken by a main character, and most often alone on stage (the
        // soliloquy, which a teacher names first), or a scene opens with it. The more a
        // character speaks in the whole play, the more their long speeches are what it is read
        // for (Hamlet's soliloquies over Claudius's, by about as much as Hamlet out-speaks
        // him), and the title role's most of all (Lear's "every inch a king" over the Fool's
        // prophecy).
        let spoken: HashMap<&str, usize> = self.speeches.iter().fold(HashMap::new(), |mut m, s| {
            *m.entry(s.speaker.as_str()).or_default() += s.end - s.start;
            m
        });
        let total = spoken.values().sum::<usize>().max(1) as f32;
        // What leads to each speech: from the end of the one before to its first quarter.
        let leads: Vec<&str> = (0..self.speeches.len())
            .map(|i| {
                let s = &self.speeches[i];
                let before = i.checked_sub(1).map_or(0, |j| self.speeches[j].end);
                &text[before..boundary(text, s.start + (s.end - s.start) / 4)]
            })
            .collect();
        let opens_scene = |l: &str| l.contains("\nScene") || l.contains("\nSCENE");
        // Alone: no one else on stage by the directions, or on entering alone (`[Enter Hamlet.]`
        // with Ophelia unseen at her book).
        let stage = alone_on_stage(text, &self.speeches, &self.personae, &self.cast);
        let alone: Vec<bool> = leads
            .iter()
            .zip(&self.speeches)
            .zip(stage)
            .map(|((l, s), by_stage)| {
                by_stage
                    || enters_alone(l, &s.speaker)
                    || sentences(text, s.start, s.end, true)
                        .first()
                        .is_some_and(|r| calls_on_absent(&text[r.0..r.1]))
            })
            .collect();
        let mut ranked: Vec<(f32, usize)> = self
            .speeches
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let lines = text[s.start..s.end].lines().count() as f32;
                let share = spoken.get(s.speaker.as_str()).copied().unwrap_or(0) as f32 / total;
                let mut w = if self.is_main(&s.speaker) {
                    1.0 + 2.0 * share
                } else {
                    1.0
                };
                if self.is_title_role(&s.speaker) {
                    w *= 2.0;
                }
                if alone[i] {
                    w *= 3.0;
                } else if opens_scene(leads[i]) {
                    w *= 1.5;
                }
                (lines * w, i)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        let known = self.known(&ranked, of, (2 * n + 4).min(READ_SPEECHES));
        let parts = self.parts.clone();
        let part_of = |at: usize| parts.iter().position(|p| (p.1..p.2).contains(&at));
        // Where a set piece starts: after an exit near the top, at the first unused sentence of
        // seven words or more (past a farewell and "Now I am alone."). A speech with none is
        // not chosen, so that another takes its place.
        let opening = |i: usize, s: &Speech| {
            // The sentence the best-known lines begin in.
            if let Some(k) = known.get(&i).filter(|k| k.best >= k.opening + SURER_INSIDE)
                && let Some(r) = sentences(text, s.start, s.end, true)
                    .into_iter()
                    .find(|r| r.1 > k.at && word_count(text, *r) >= 5 && !self.is_used(*r))
            {
                return Some(r);
            }
            let quarter = boundary(text, s.start + (s.end - s.start) / 4);
            let mut from = s.start;
            if let Some(j) = text[s.start..quarter].rfind("[Ex")
                && let Some(k) = text[s.start + j..s.end].find(']')
            {
                from = s.start + j + k + 1;
            }
            sentences(text, from, s.end, true)
                .into_iter()
                .find(|r| word_count(text, *r) >= 7 && !self.is_used(*r))
        };
        let mut chosen: Vec<(usize, (usize, usize))> = Vec::new();
        // The set pieces the reader knows come first, best known first, after the one the
        // ranking puts first: a small model knows some famous lines and not others (the
        // 135M one is sure of "To be, or not to be" and not of "Now is the winter of our
        // discontent"), so knowing is a reason to take a passage, not to drop the first.
        let mut order: Vec<usize> = ranked
            .iter()
            .map(|r| r.1)
            .filter(|i| of(&self.speeches[*i]))
            .take(1)
            .collect();
        let mut by_heart: Vec<usize> = known
            .keys()
            .copied()
            .filter(|i| !order.contains(i))
            .collect();
        by_heart.sort_by(|a, b| known[b].best.total_cmp(&known[a].best).then(a.cmp(b)));
        order.extend(by_heart);
        let rest: Vec<usize> = ranked
            .iter()
            .map(|r| r.1)
            .filter(|i| of(&self.speeches[*i]) && !order.contains(i))
            .collect();
        order.extend(rest);
        for pass in 0..2 {
            for &i in order.iter().take(80) {
                if chosen.len() == n {
                    break;
                }
                let s = &self.speeches[i];
                let same_speaker = chosen
                    .iter()
                    .filter(|&&(j, _)| self.speeches[j].speaker == s.speaker && !alone[j])
                    .count();
                let same_part = chosen
                    .iter()
                    .any(|&(j, _)| part_of(self.speeches[j].start) == part_of(s.start));
                // Soliloquies are what a play is read for: a character may have any number of
                // them among the passages, but at most two other speeches.
                if chosen.iter().any(|c| c.0 == i)
                    || same_speaker >= 2 && !alone[i]
                    || pass == 0 && same_part
                {
                    continue;
                }
                if let Some(r) = opening(i, s) {
                    chosen.push((i, r));
                }
            }
        }
        chosen.sort_by_key(|c| c.1.0);
        let mut points = Vec::new();
        for (i, r) in chosen {
            let speaker = self.speeches[i].speaker.clone();
            let label = part_of(r.0).map(|p| heading(&parts[p].0));
            points.push(self.take(r, Some(&speaker), label, 1.0));
        }
        points
    }

    /// What the reader knows best in each of the first `read` set pieces of `ranked` that `of`
    /// accepts, kept for those it knows by heart: by speech, how sure it is of its best-known
    /// two lines running, and where the first of them starts.
    fn known(
        &self,
        ranked: &[(f32, usize)],
        of: &dyn Fn(&Speech) -> bool,
        read: usize,
    ) -> HashMap<usize, Known> {
        let mut known = HashMap::new();
        let Some(reader) = self.reader else {
            return known;
        };
        let text = self.text();
        for &(_, i) in ranked.iter().filter(|r| of(&self.speeches[r.1])).take(read) {
            let s = &self.speeches[i];
            let spoken: Vec<(usize, &str)> = lines(text, s.start, s.end)
                .filter(|(_, l)| {
                    let l = l.trim();
                    !l.is_empty() && !l.starts_with('[')
                })
                .take(READ_LINES)
                .collect();
            if spoken.is_empty() {
                continue;
            }
            let lead = &text[boundary(text, s.start.saturating_sub(160))..s.start];
            let texts: Vec<&str> = spoken.iter().map(|l| l.1).collect();
            let Some(sure) = reader
                .familiarity(lead, &texts)
                .filter(|s| s.len() == texts.len())
            else {
                continue;
            };
            // A short line is sure of itself ("By your leave.", "matter in it."): two lines
            // running, the first of four words or more, ten words in all.
            let words: Vec<usize> = texts.iter().map(|l| l.split_whitespace().count()).collect();
            let windows: Vec<(f32, usize)> = (0..spoken.len())
                .filter(|&j| words[j] >= 4 && words[j] + words.get(j + 1).unwrap_or(&0) >= 10)
                .map(|j| {
                    let both = sure.get(j + 1).map_or(sure[j], |n| (sure[j] + n) / 2.0);
                    (both, spoken[j].0)
                })
                // A reader's NaN would sort above every number.
                .filter(|w| !w.0.is_nan())
                .collect();
            let best = windows.iter().copied().max_by(|a, b| a.0.total_cmp(&b.0));
            if let (Some(&(opening, _)), Some((best, at))) = (windows.first(), best) {
                tracing::debug!(
                    speaker = %s.speaker,
                    best,
                    opening,
                    line = text[at..].lines().next().unwrap_or(""),
                    "brief: the reader's best-known lines of a set piece"
                );
                known.insert(i, Known { best, at, opening });
            }
        }
        // Known by heart is well above the rest of the play's set pieces: how sure a model is
        // of a line depends on its spelling and verse as much as on its fame, so each play
        // is its own measure (Hamlet's "To be, or not to be" -1.6 and "What's Hecuba to him"
        // -2.1, against a median of -3.4); fewer than five read give no median to stand above.
        let mut all: Vec<f32> = known.values().map(|k| k.best).collect();
        all.sort_by(f32::total_cmp);
        let median = all.get(all.len() / 2).copied().unwrap_or(0.0);
        known.retain(|_, k| all.len() >= 5 && k.best >= median + KNOWN_ABOVE_MEDIAN);
        known
    }

    /// The character of the cast list that `name` (lower case, as asked: `hamlet`, `lady
    /// macbeth`, `king`) names, with the tags they speak under; `None` when no one of the cast
    /// list who speaks goes by that name.
    fn character(&self, name: &str) -> Option<(Persona, HashSet<String>)> {
        let text = self.text();
        // "Macduff's son", "Hamlet's mother": the one the cast list calls so (`BOY, Son to
        // Macduff.`, `Gertrude, Queen of Denmark, and Mother of Hamlet.`).
        if let Some((whose, what)) = name.split_once("'s ")
            && let Some(p) = self
                .personae
                .iter()
                .filter(|q| {
                    let desc = q.description(text);
                    [" to ", " of "]
                        .iter()
                        .any(|by| desc.contains(&format!("{}{by}{}", what.trim(), whose.trim())))
                })
                .min_by_key(|q| self.speaking_rank(q))
        {
            return self.speaking(p.clone());
        }
        let asked = name_words(name);
        // `king lear` is the cast list's `LEAR, King of Britain`. Of two that fit (two
        // Richards), the one who speaks more.
        let mut fit = personae_for(name, &self.personae);
        if fit.is_empty() {
            fit = personae_for(&asked.join(" "), &self.personae);
        }
        let p = fit
            .into_iter()
            .min_by_key(|q| self.speaking_rank(q))?
            .clone();
        // Every name word asked for is one of theirs, or of a title they have (`gloster`,
        // `richard iii`; `lady macbeth` is not Macbeth), or the question names a role only
        // one character has (`king`).
        let mut own = name_words(&p.name);
        own.extend(p.titles.iter().flat_map(|t| name_words(t)));
        // A rank asked for is in their line too (`king lear`: `Lear, King of Britain`; not
        // `lady hamlet`).
        let line = text[p.line.0..p.line.1].to_lowercase();
        let ranks = name
            .split_whitespace()
            .filter(|w| TITLES.contains(w))
            .all(|w| line.split(|c: char| !c.is_alphabetic()).any(|l| l == w));
        let fits = if asked.is_empty() {
            p.role == name
        } else {
            ranks && asked.iter().all(|w| own.contains(w))
        };
        if !fits {
            return None;
        }
        self.speaking(p)
    }

    /// The one speaker tag that abbreviates a name the cast list does not give (`HOT.` for
    /// Hotspur, listed as `Henry Percy, his son.`): a death is found by the tags alone.
    fn tag_only(&self, name: &str) -> Option<HashSet<String>> {
        let [asked] = name_words(name).try_into().ok()?;
        let mut fit = self.main.iter().filter(|t| {
            let t = t.to_lowercase();
            t.chars().count() >= 3 && t.chars().all(char::is_alphabetic) && asked.starts_with(&t)
        });
        match (fit.next(), fit.next()) {
            (Some(t), None) => Some(HashSet::from([t.clone()])),
            _ => None,
        }
    }

    /// `p` with the tags they speak under (theirs by the cast list, or by their role when
    /// the cast list names no one so: `SON.` for `BOY, Son to Macduff.`); `None` when they
    /// never speak.
    fn speaking(&self, p: Persona) -> Option<(Persona, HashSet<String>)> {
        let tags: HashSet<String> = self
            .main
            .iter()
            .filter(|t| match self.persona(t) {
                Some(q) => q.name_at == p.name_at,
                None => !p.role.is_empty() && t.to_lowercase() == p.role,
            })
            .cloned()
            .collect();
        (!tags.is_empty()).then_some((p, tags))
    }

    /// How the character `name` (lower case, as asked) dies, as the play shows it, in up to
    /// `n` points in the order of the text: their last words, with the direction when it
    /// follows them (`O, I am slain! [Falls and dies.]`); the words of the one who speaks
    /// before them (`How now? a rat? [Draws.] Dead for a ducat, dead!`); the deed that kills
    /// them, when the scene shows it first (`It is too late. [Smothers her.]`); what is said
    /// next, theirs first (`I kiss'd thee ere I kill'd thee`); the opening of their last
    /// speech; then the lines before. `None` when the play shows no death of theirs: one only
    /// told of (Ophelia's) is left to the search.
    fn death(&mut self, name: &str, n: usize) -> Option<Vec<KeyPoint>> {
        if !self.is_play() || n == 0 {
            return None;
        }
        let tags = match self.character(name) {
            Some((_, tags)) => tags,
            None => self.tag_only(name)?,
        };
        let text = self.text();
        let shown = |at: usize| direction(text, at);
        let inner = |at: usize| shown(at).to_lowercase();
        // Whether a clause of a direction shows them dying: the name nearest before its word
        // of death is theirs (`King dies`, `young Seward is slain`; not Lear in `Re-enter
        // Lear, with Cordelia dead in his arms`).
        let dies_in = |clause: &str| {
            let words: Vec<&str> = clause
                .split(|c: char| !c.is_alphabetic())
                .filter(|w| !w.is_empty())
                .collect();
            let theirs = |w: &&str| {
                let w = w.to_lowercase();
                tags.iter().any(|t| self.named_by(t, &w))
            };
            // Killed by name (`Kills TITUS.`, `draw, and kill CORIOLANUS`).
            let kills = ["kill", "kills", "slay", "slays", "murder", "murders"];
            if let Some(k) = words
                .iter()
                .position(|w| kills.contains(&w.to_lowercase().as_str()))
                && words[k + 1..]
                    .iter()
                    .find(|w| w.starts_with(char::is_uppercase))
                    .is_some_and(theirs)
            {
                return true;
            }
            let Some(i) = words.iter().position(|w| is_death(&w.to_lowercase())) else {
                return false;
            };
            words[..i]
                .iter()
                .rev()
                .find(|w| w.starts_with(char::is_uppercase))
                .is_some_and(theirs)
        };
        let speech_before = |at: usize| self.speeches.partition_point(|s| s.start < at);
        // The first direction of a death that is theirs: right after a speech of theirs, with
        // no one else its subject ([`Self::does`]), or naming them in its clause of death
        // (`King dies.`; not `Dies. Exit Lady Macduff, crying Murder`, her son's).
        let at = self.deeds.iter().copied().find(|&at| {
            // The speech before is read only for a direction of death (most deeds are a
            // fight or a blow); one killing them by name (`Kills TITUS.`) is found by clause.
            let after_theirs = is_death(&inner(at))
                && self.speeches[..speech_before(at)]
                    .last()
                    .filter(|s| tags.contains(&s.speaker))
                    .is_some_and(|s| {
                        let end = sentences(text, s.start, s.end.min(at), true)
                            .last()
                            .map_or(s.start, |r| r.1);
                        self.deed_after(end)
                            .is_some_and(|(d_at, shown)| d_at == at && self.does(&s.speaker, shown))
                    });
            after_theirs || shown(at).split(['.', ';']).any(dies_in)
        });
        // Or none, and they go off fighting after their last speech, never to speak again
        // (Macbeth's `lay on, Macduff; ... [Exeunt fighting.]`): the play's last sight of them.
        let at = at.or_else(|| {
            let last = self
                .speeches
                .iter()
                .rev()
                .find(|s| tags.contains(&s.speaker))?;
            let end = sentences(text, last.start, last.end, true).last()?.1;
            let (d, shown) = self.deed_after(end)?;
            let shown = shown.to_lowercase();
            (["exit", "exeunt"].iter().any(|m| shown.starts_with(m)) && shown.contains("fighting"))
                .then_some(d)
        })?;
        let close = direction_end(text, at);
        let scene = self
            .work
            .sections
            .iter()
            .filter(|(_, a, b)| (*a..*b).contains(&at))
            .map(|(_, a, b)| (*a, *b))
            .max_by_key(|r| r.0)
            .unwrap_or((0, text.len()));
        let first = speech_before(scene.0);
        let before = speech_before(at);
        let until = speech_before(scene.1);
        let said =
            |s: &Speech, upto: usize| sentences(text, s.start, s.end.min(upto).max(s.start), true);
        // A speech's last words up to `upto`: its last sentence, with the ones before while it
        // is short (`How now? a rat? [Draws.] Dead for a ducat, dead!`, `O Antony! O
        // Antony!`, `O happy dagger! This is thy sheath [stabs herself]`), and the direction
        // right after when only space comes between (`O, I am slain! [Falls and dies.]`).
        let last_of = |s: &Speech, upto: usize, dying: bool| {
            let all = said(s, upto);
            let (mut k, mut r) = (all.len().checked_sub(1)?, *all.last()?);
            if dying {
                r = dying_words(text, r);
            }
            while k > 0 && word_count(text, r) < 6 {
                k -= 1;
                // The sentence before, or its last clauses (`a fugitive: O Antony! O Antony!`).
                match clause_tail(text, (all[k].0, r.1), MAX_WORDS) {
                    Some(from) => r.0 = from,
                    None => break,
                }
            }
            let d = self
                .deeds
                .get(self.deeds.partition_point(|&d| d < r.1))
                .copied();
            let between =
                |d: usize| text[r.1..d].trim_matches(|c: char| c.is_whitespace() || c == '-');
            if let Some(d) = d.filter(|&d| d <= upto && between(d).is_empty()) {
                // One's last words are kept whole, the direction then quoted apart; another's
                // are cut short enough to show the deed (`Precious villain! [Iago stabs
                // Emilia, and then runs out.]`, not the question before it).
                let with = (r.0, direction_end(text, d));
                match clause_tail(text, with, MAX_WORDS) {
                    Some(from) if from == r.0 || !dying && from < d => r = (from, with.1),
                    _ => {}
                }
            }
            (word_count(text, r) >= 3).then(|| (r, Some(s.speaker.clone())))
        };
        let first_words = |s: &Speech| {
            said(s, s.end)
                .into_iter()
                .find(|r| word_count(text, *r) >= 3)
                .map(|r| (r, Some(s.speaker.clone())))
        };
        let others = |range: std::ops::Range<usize>| {
            range
                .rev()
                .find(|&k| !tags.contains(&self.speeches[k].speaker))
        };
        // What to quote, most telling first: (range, speaker).
        let mut picked: Vec<((usize, usize), Option<String>)> = Vec::new();
        let mut last_words = None;
        // Their last speech, when it is one of the three before the death.
        let mine = (first..before)
            .rev()
            .take(3)
            .find(|&i| tags.contains(&self.speeches[i].speaker));
        if let Some(i) = mine {
            let s = &self.speeches[i];
            if let Some(p) = last_of(s, at, true) {
                last_words = Some(p.0);
                picked.push(p);
            }
        }
        // Another's words between theirs and the death, often the deed (`Here, thou
        // incestuous, murderous, damned Dane, Drink off this potion.`).
        if let Some(k) = others(mine.map_or(first, |i| i + 1)..before) {
            picked.extend(last_of(&self.speeches[k], at, false));
        }
        picked.push(((at, close), None));
        // The deed that kills them, when the scene shows it after any other death: one that
        // names them, or is done to `him` or `her` (`It is too late. [Smothers her.]`).
        let deed = self.deeds[..self.deeds.partition_point(|&d| d < at)]
            .iter()
            .rev()
            .copied()
            .take_while(|&d| d >= scene.0 && !is_death(&inner(d)))
            .find(|&d| {
                let words = inner(d);
                tags.iter().any(|t| self.named_by(t, &words))
                    || words
                        .split(|c: char| !c.is_alphabetic())
                        .any(|w| w == "him" || w == "her")
            });
        if let Some(d) = deed {
            let said_with = self.speeches[..speech_before(d)]
                .last()
                .and_then(|s| last_of(s, d, false))
                .filter(|p| p.0.1 > d);
            picked.push(said_with.unwrap_or(((d, direction_end(text, d)), None)));
        }
        // The one who speaks before their last speech.
        if let Some(j) = mine.and_then(|i| others(first..i)) {
            picked.extend(last_of(&self.speeches[j], at, false));
        }
        // What is said next: their own words when they speak again (`I kiss'd thee ere I
        // kill'd thee`), else the first words after.
        let next: Vec<&Speech> = self.speeches[before..until]
            .iter()
            .filter(|s| s.start >= close)
            .take(3)
            .collect();
        picked.extend(
            next.iter()
                .find(|s| tags.contains(&s.speaker))
                .or(next.first())
                .and_then(|s| first_words(s)),
        );
        // The opening of their last speech (`Soft you; a word or two before you go.`), then
        // what is said round it.
        picked.extend(mine.and_then(|i| first_words(&self.speeches[i])));
        picked.extend(next.iter().filter_map(|s| first_words(s)));
        picked.extend(
            (first..before)
                .rev()
                .take(4)
                .filter_map(|k| last_of(&self.speeches[k], at, false)),
        );
        let mut kept: Vec<((usize, usize), Option<String>)> = Vec::new();
        for p in picked {
            if kept.len() < n && !kept.iter().any(|k| k.0.0 < p.0.1 && p.0.0 < k.0.1) {
                kept.push(p);
            }
        }
        kept.sort_by_key(|k| k.0.0);
        let part = self
            .parts
            .iter()
            .find(|q| (q.1..q.2).contains(&at))
            .map(|q| heading(&q.0));
        Some(
            kept.into_iter()
                .map(|(r, who)| {
                    let label = (Some(r) == last_words).then(|| {
                        part.as_ref()
                            .map_or_else(|| "Last words".to_owned(), |p| format!("Last words, {p}"))
                    });
                    self.take(r, who.as_deref(), label, 1.0)
                })
                .collect(),
        )
    }

    /// Who the character `name` (lower case, as asked: `hamlet`, `lady macbeth`, `king`) is,
    /// told by the play itself, in up to `n` points: the cast list's line, the first words,
    /// the set pieces, the last words when they die on stage, and the other entries of the
    /// cast list that name them (`Horatio, Friend to Hamlet.`). `None` when no one of the cast
    /// list who speaks goes by that name: a question about someone else, or no play.
    fn profile(&mut self, name: &str, n: usize) -> Option<Vec<KeyPoint>> {
        if !self.is_play() || n == 0 {
            return None;
        }
        let text = self.text();
        let (p, tags) = self.character(name)?;
        let theirs: Vec<Speech> = self
            .speeches
            .iter()
            .filter(|s| tags.contains(&s.speaker))
            .cloned()
            .collect();
        if theirs.is_empty() {
            return None;
        }
        let parts = self.parts.clone();
        let part = |at: usize| {
            parts
                .iter()
                .find(|q| (q.1..q.2).contains(&at))
                .map(|q| heading(&q.0))
        };
        let labelled = |what: &str, at: usize| {
            Some(part(at).map_or_else(|| what.to_owned(), |l| format!("{what}, {l}")))
        };

        let intro = self.take(p.line, None, Some("Cast list".into()), 1.0);
        // The entries that name them tell who they are to the others; the main characters'
        // first (Gertrude, `Mother of Hamlet`, before the Ghost).
        // Named by their whole name in the description (`Wife to Iago`, `Ghost of Hamlet's
        // Father`; Seyton `attending on Macbeth` is not about Lady Macbeth).
        let whole = p.name.split_whitespace().collect::<Vec<_>>().join(" ");
        let names_them = |q: &Persona| {
            let desc = q.description(text);
            let words: Vec<&str> = desc
                .split(|c: char| !c.is_alphanumeric() && c != '\'')
                .map(|w| w.strip_suffix("'s").unwrap_or(w))
                .filter(|w| !w.is_empty())
                .collect();
            words.join(" ").contains(&whole) && !whole.is_empty()
        };
        let mut related: Vec<&Persona> = self
            .personae
            .iter()
            .filter(|q| q.line != p.line && names_them(q))
            .collect();
        related.sort_by_key(|q| self.speaking_rank(q));
        let related: Vec<(usize, usize)> = related.iter().take(2).map(|q| q.line).collect();
        let related: Vec<KeyPoint> = related
            .into_iter()
            .map(|r| self.take(r, None, Some("Cast list".into()), 1.0))
            .collect();

        // Their first words: the first sentence of four words or more they say.
        let first = theirs
            .iter()
            .take(3)
            .flat_map(|s| {
                sentences(text, s.start, s.end, true)
                    .into_iter()
                    .map(move |r| (r, s.speaker.clone(), s.start))
            })
            // Not a letter they read out (Lady Macbeth's `"They met me in the day of
            // success...`): no quotation mark left open before it in the speech.
            .find(|(r, _, from)| {
                let open = text[*from..r.0].matches(['"', '“', '”']).count() % 2 == 1;
                word_count(text, *r) >= 4 && !open && !text[r.0..r.1].starts_with(['"', '“'])
            });
        let opening = first.as_ref().map(|f| f.2);
        let first = first.map(|(r, who, _)| {
            let label = labelled("First words", r.0);
            self.take(r, Some(&who), label, 1.0)
        });

        // Their last words, when a deed that is theirs follows them closely (`[Dies.]`).
        let last = theirs.last().and_then(|s| {
            let r = sentences(text, s.start, s.end, true)
                .into_iter()
                .rev()
                .find(|r| word_count(text, *r) >= 3)?;
            let r = dying_words(text, r);
            let (_, direction) = self.deed_after(r.1)?;
            self.does(&s.speaker, direction)
                .then(|| (r, s.speaker.clone()))
        });
        let last = last.and_then(|(r, who)| {
            (!self.is_used(r)).then(|| {
                let label = labelled("Last words", r.0);
                self.take(r, Some(&who), label, 1.0)
            })
        });

        // Not the speech their first words are from again (Richard's opening soliloquy
        // quoted twice, "Now is the winter" and "Now are our brows bound").
        let pieces = self.set_pieces(2, &|s| {
            tags.contains(&s.speaker) && opening != Some(s.start)
        });

        // The most telling first when `n` is short; then shown in the order of the play.
        let mut pieces = pieces.into_iter();
        let mut related = related.into_iter();
        let mut ranked: Vec<(usize, KeyPoint)> = vec![(0, intro)];
        ranked.extend(first.map(|k| (2, k)));
        ranked.extend(pieces.next().map(|k| (3, k)));
        ranked.extend(last.map(|k| (4, k)));
        ranked.extend(related.next().map(|k| (1, k)));
        ranked.extend(pieces.next().map(|k| (3, k)));
        ranked.extend(related.next().map(|k| (1, k)));
        ranked.truncate(n);
        ranked.sort_by_key(|(order, k)| (*order, k.citation.start));
        Some(ranked.into_iter().map(|r| r.1).collect())
    }

    /// The opening sentences: what the document says it is about.
    fn about(&mut self) -> Facet {
        let start = self
            .work
            .sections
            .iter()
            .find(|s| !s.0.is_empty())
            .map_or(0, |s| s.1);
        let cands = self.candidates((start, self.text().len()));
        let mut points = Vec::new();
        for (r, _) in cands {
            if points.len() == 3 {
                break;
            }
            if word_count(self.text(), r) >= 6 {
                points.push(self.take(r, None, None, 1.0));
            }
        }
        Facet {
            title: format!("What {} is about", self.work.title),
            points,
        }
    }

    /// Distinctive terms of the document against the others (frequent here, rare or absent in
    /// the other documents), each with its plainest sentence. Names count: in a technical text
    /// they are the terms (`SQLite`, `DataFusion`).
    fn key_terms(&mut self, background: &Counts, n: usize) -> Facet {
        let text = self.text();
        let mine = Counts::of(text);
        let mut surface: HashMap<String, HashMap<String, usize>> = HashMap::new();
        for w in tokens(text) {
            *surface
                .entry(key(w))
                .or_default()
                .entry(w.to_owned())
                .or_default() += 1;
        }
        for (k, written) in phrases(text) {
            *surface.entry(k).or_default().entry(written).or_default() += 1;
        }
        let others = background.docs as f32;
        let mut terms: Vec<(f32, String)> = mine
            .words
            .iter()
            // Short single words are rarely terms (`lower`, `time`).
            .filter(|(k, f)| **f >= 3 && (k.contains(' ') || k.len() >= 6))
            .map(|(k, &f)| {
                let r = f as f32 / mine.total.max(1) as f32;
                let b = (background.get(k) as f32 + 1.0) / (background.total.max(1) as f32);
                // Spread over the other documents: a word all of them use is common language.
                let df = background.df.get(k).copied().unwrap_or(0) as f32;
                let rare = ((others + 1.0) / (df + 1.0)).ln().max(0.0) + 0.1;
                // A phrase says more than either of its words.
                let phrase = if k.contains(' ') { 6.0 } else { 1.0 };
                (f as f32 * (r / b).ln() * rare * phrase, k.clone())
            })
            .filter(|t| t.0 > 0.0)
            .collect();
        terms.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut points = Vec::new();
        let mut shown_words: HashSet<String> = HashSet::new();
        for (_, k) in terms.into_iter().take(4 * n) {
            if points.len() == n {
                break;
            }
            // One term per word: `tail latency` and `latency` are the same term.
            if k.split(' ').any(|w| shown_words.contains(w)) {
                continue;
            }
            let score = |r: (usize, usize), _: Option<&str>| {
                // The term must be among the words shown (a long sentence is abridged).
                let ((a, b), _) = abridge(text, r, MAX_WORDS);
                let s = &text[a..b];
                let words: Vec<String> = if k.contains(' ') {
                    phrases(s).map(|p| p.0).collect()
                } else {
                    tokens(s).map(key).collect()
                };
                match words.iter().position(|w| *w == k) {
                    Some(p) => 1.0 - 0.05 * p as f32 - 0.01 * words.len() as f32,
                    None => f32::MIN,
                }
            };
            if let Some((r, who, v)) = self.best((0, text.len()), 25, &score)
                && v > f32::MIN
            {
                let shown = surface
                    .get(&k)
                    .and_then(|s| s.iter().max_by_key(|(w, n)| (**n, std::cmp::Reverse(*w))))
                    .map_or(k.clone(), |(w, _)| w.clone());
                shown_words.extend(k.split(' ').map(str::to_owned));
                points.push(self.take(r, who.as_deref(), Some(shown), v));
            }
        }
        Facet {
            title: "Key terms".into(),
            points,
        }
    }

    /// Questions the document asks and what it says is not done yet.
    fn open_questions(&mut self, n: usize) -> Facet {
        let text = self.text();
        let mut points = Vec::new();
        let cands = self.candidates((0, text.len()));
        let mut parts_used = HashSet::new();
        for pass in 0..2 {
            for (r, _) in &cands {
                if points.len() == n {
                    break;
                }
                let s = text[r.0..r.1].to_lowercase();
                let open = s.ends_with('?') || OPEN.iter().any(|w| s.contains(w));
                let words = word_count(text, *r);
                if !open || !(5..=40).contains(&words) || self.is_used(*r) {
                    continue;
                }
                let part = self.parts.iter().position(|p| (p.1..p.2).contains(&r.0));
                if pass == 0 && !parts_used.insert(part) {
                    continue;
                }
                let label = part.map(|p| heading(&self.parts[p].0));
                points.push(self.take(*r, None, label, 1.0));
            }
        }
        points.sort_by_key(|p| p.citation.start);
        Facet {
            title: "Open questions".into(),
            points,
        }
    }
}

/// What a work says, counted the way [`facets`] counts it (a play's speeches, not its stage
/// directions and speaker tags): the background another work is compared against.
pub fn counts(work: &Work) -> Counts {
    let a = Analysis::new(work);
    let from = a.parts.first().map_or(0, |p| p.1);
    a.counted((from, work.text.len()))
}

/// Who the character `name` (as asked: `Hamlet`, `Lady Macbeth`, `the king`) of the play
/// `work` is, in up to `n` cited points ([`Analysis::profile`]), numbered from 1; `None` when
/// `work` is no play or no one of its cast goes by that name.
pub fn profile(
    work: &Work,
    name: &str,
    n: usize,
    reader: Option<&dyn Reader>,
) -> Option<Vec<KeyPoint>> {
    let name = name.trim().to_lowercase();
    let name = name.strip_prefix("the ").unwrap_or(&name).trim();
    let mut points = Analysis::new(work).with_reader(reader).profile(name, n)?;
    for (i, p) in points.iter_mut().enumerate() {
        p.citation.n = i + 1;
    }
    Some(points)
}

/// How the characters `names` (as asked: `Polonius`, `Romeo and Juliet`) of the play `work`
/// die, in up to `n` cited points shared between them ([`Analysis::death`]), numbered from 1;
/// `None` when `work` is no play or shows none of their deaths.
pub fn death(work: &Work, names: &str, n: usize) -> Option<Vec<KeyPoint>> {
    let names = names.trim().to_lowercase();
    let names: Vec<&str> = names
        .split(" and ")
        .map(|n| n.trim().strip_prefix("the ").unwrap_or(n.trim()))
        .filter(|n| !n.is_empty())
        .collect();
    let share = n.div_ceil(names.len().max(1));
    let mut analysis = Analysis::new(work);
    let mut points: Vec<KeyPoint> = names
        .iter()
        .filter_map(|name| analysis.death(name, share))
        .flatten()
        .take(n)
        .collect();
    if points.is_empty() {
        return None;
    }
    for (i, p) in points.iter_mut().enumerate() {
        p.citation.n = i + 1;
    }
    Some(points)
}

/// Who is who in a play, for answering questions about it: who speaks where, named as the
/// cast list names them (`Hamlet` for the tag `Ham.`), and the words a question may name each
/// speaker by. An answer quotes sentences of chunks that may begin in the middle of a speech,
/// where the chunk alone shows no tag, and an edition's tags are abbreviations (`Mess.`).
#[derive(Debug, Clone, Default)]
pub struct Cast {
    /// Each speech's range and its speaker's name, in the order of the text.
    speeches: Vec<(usize, usize, usize)>,
    /// Speakers' names; an index of `speeches` and `names` points here.
    speakers: Vec<String>,
    /// The phrases a speaker goes by, lower case (`ham`, `hamlet`; `first witch`, `witch`;
    /// `ghost of hamlet's father`, `ghost`), with the speaker.
    names: Vec<(Vec<String>, usize)>,
    /// Where the play proper begins, after its title and cast list.
    front: usize,
}

/// A question's words, lower case, without a possessive `'s` (`gloster's` → `gloster`).
pub(crate) fn question_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| {
            let w = w.to_lowercase();
            let w = w.strip_suffix("'s").unwrap_or(&w).trim_matches('\'');
            w.to_owned()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// `question` without the names `casts` find in it ("How does Ophelia die?" → "how does
/// die"), when they find one and two words or more are left: what it asks of them.
pub(crate) fn without_names<'a>(
    question: &str,
    casts: impl IntoIterator<Item = &'a Cast>,
) -> Option<String> {
    let words = question_words(question);
    let mut keep = vec![true; words.len()];
    for cast in casts {
        for (_, (a, b)) in cast.named_in(question) {
            keep[a.min(words.len())..b.min(words.len())].fill(false);
        }
    }
    let rest: Vec<&str> = words
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(w, _)| w.as_str())
        .collect();
    (rest.len() < words.len() && rest.len() >= 2).then(|| rest.join(" "))
}

impl Cast {
    /// The cast of `work`; empty when it is no play.
    pub fn of(work: &Work) -> Cast {
        let a = Analysis::new(work);
        let mut cast = Cast::default();
        if !a.is_play() {
            return cast;
        }
        cast.front = a.parts.first().map_or(0, |p| p.1);
        let mut index: HashMap<String, usize> = HashMap::new();
        for s in &a.speeches {
            let who = a.speaker_name(&s.speaker);
            let next = cast.speakers.len();
            let i = *index.entry(who.clone()).or_insert(next);
            if i == next {
                cast.speakers.push(who.clone());
                let lower = who.to_lowercase();
                let mut phrases = vec![s.speaker.to_lowercase(), lower.clone()];
                // The head of the name (`ghost` of `Ghost of Hamlet's Father`, `witch` of
                // `First Witch`), not a rank (`lady` of `Lady Macbeth`).
                if let Some(head) = lower
                    .split(|c: char| !c.is_alphanumeric())
                    .find(|w| w.len() >= 3 && !TITLES.contains(w))
                    && head != lower
                    && !TITLES_OF_HEAD.iter().any(|t| lower.starts_with(t))
                {
                    phrases.push(head.to_owned());
                }
                for ph in phrases {
                    let words = question_words(&ph);
                    // `All.` and `Both.` speak together; "all" in a question names no one.
                    let anyone = words.iter().all(|w| UNNAMING.contains(&w.as_str()));
                    if !anyone && !cast.names.contains(&(words.clone(), i)) {
                        cast.names.push((words, i));
                    }
                }
            }
            cast.speeches.push((s.start, s.end, i));
        }
        cast
    }

    /// Whether `at` is in the front matter (title, cast list), before the play proper.
    pub fn in_front(&self, at: usize) -> bool {
        at < self.front
    }

    /// Who speaks at `at`, as the cast list names them; `None` outside every speech.
    pub fn speaker_at(&self, at: usize) -> Option<&str> {
        let i = self.speeches.partition_point(|s| s.0 <= at);
        let s = self.speeches.get(i.checked_sub(1)?)?;
        (at < s.1).then(|| self.speakers[s.2].as_str())
    }

    /// The speakers a question names, in the order it names them, each with where its name
    /// begins and ends among the question's words ([`question_words`]). The longest name
    /// that fits is taken (`lady macbeth`, not `macbeth`); a plural names every speaker of
    /// that name (`witches`: the three witches).
    pub fn named_in(&self, question: &str) -> Vec<(Vec<&str>, (usize, usize))> {
        let words = question_words(question);
        let fits = |name: &[String], at: usize| {
            name.iter().enumerate().all(|(k, n)| {
                words.get(at + k).is_some_and(|w| {
                    w == n
                        || k + 1 == name.len()
                            && (w.strip_suffix('s') == Some(n.as_str())
                                || w.strip_suffix("es") == Some(n.as_str()))
                })
            })
        };
        let mut out = Vec::new();
        let mut at = 0;
        while at < words.len() {
            let longest = self
                .names
                .iter()
                .filter(|(name, _)| fits(name, at))
                .map(|(name, _)| name.len())
                .max();
            match longest {
                Some(len) => {
                    let mut who: Vec<&str> = Vec::new();
                    for (name, i) in &self.names {
                        if name.len() == len && fits(name, at) {
                            let w = self.speakers[*i].as_str();
                            if !who.contains(&w) {
                                who.push(w);
                            }
                        }
                    }
                    out.push((who, (at, at + len)));
                    at += len;
                }
                None => at += 1,
            }
        }
        out
    }

    /// Who the question asks about as the one who acts or speaks (`What does the ghost ask
    /// Hamlet to do?`: the Ghost; `Why does Iago hate Othello?`: Iago), whose own lines
    /// answer it; none when what is asked is done to them or told of them (`How does Ophelia
    /// die?`, `How is Macbeth killed?`, `What happens to Gloster's eyes?`).
    pub fn subject_of(&self, question: &str) -> Vec<&str> {
        let words = question_words(question);
        let named = self.named_in(question);
        let Some((who, (a, mut b))) = named.first().cloned() else {
            return Vec::new();
        };
        let mut who = who;
        // `Romeo and Juliet die`: the verb comes after both.
        for (more, (c, d)) in &named[1..] {
            if *c == b + 1 && words[b] == "and" {
                who.extend(more);
                b = *d;
            }
        }
        let before = words[..a]
            .iter()
            .rev()
            .find(|w| !["the", "a", "an"].contains(&w.as_str()));
        let after = words.get(b).map(String::as_str).unwrap_or("");
        let asks =
            before.is_some_and(|w| ["does", "do", "did", "will", "would"].contains(&w.as_str()));
        let told_of = ["die", "dies", "happen", "happens", "end", "get"].contains(&after);
        if asks && !told_of { who } else { Vec::new() }
    }
}

/// Words of speaker tags that name no one in a question (`ALL.`, `BOTH.`, `OMNES.`).
const UNNAMING: &[&str] = &["all", "both", "omnes", "the", "and"];

/// Names whose first word is a rank keep it: their head would name someone else
/// (`lady macbeth` is not `macbeth`).
const TITLES_OF_HEAD: &[&str] = &["lady ", "king ", "queen ", "prince "];

/// Splits `parts` into `k` runs of consecutive parts, as even as can be.
fn runs<T: Clone>(parts: &[T], k: usize) -> Vec<Vec<T>> {
    let k = k.clamp(1, parts.len().max(1));
    let mut out = Vec::new();
    let mut at = 0;
    for i in 0..k {
        let len = (parts.len() - at).div_ceil(k - i);
        out.push(parts[at..at + len].to_vec());
        at += len;
    }
    out
}

/// `Acts I-II` / `Act III` for a run of parts labelled `Act I`, `Act II`...
pub fn span(labels: &[String]) -> String {
    match labels {
        [] => String::new(),
        [one] => one.clone(),
        [first, .., last] => {
            let (kind, a) = first.split_once(' ').unwrap_or(("", first));
            let b = last.split_once(' ').map_or(last.as_str(), |x| x.1);
            if !kind.is_empty() && last.starts_with(kind) && !a.contains(' ') && !b.contains(' ') {
                format!("{kind}s {a}-{b}")
            } else {
                format!("{first} to {last}")
            }
        }
    }
}

/// The facets of `work` for `slides` content slides (the title slide not counted).
/// `background` holds the word counts of the collection's other documents (empty when it has
/// none), against which themes and key terms are judged.
pub fn facets(
    work: &Work,
    background: &Counts,
    slides: usize,
    reader: Option<&dyn Reader>,
) -> Vec<Facet> {
    let slides = slides.max(1);
    let mut a = Analysis::new(work).with_reader(reader);
    let parts = a.parts.clone();
    let play = a.is_play();
    // The facets in order of priority for a short deck; the parts facet (plot or main points)
    // takes every slide beyond four.
    let order: &[usize] = match slides {
        1 => &[1],
        2 => &[0, 1],
        3 => &[0, 1, 3],
        _ => &[0, 1, 2, 3],
    };
    let part_slides = slides.saturating_sub(3).max(1);
    // At most six parts a slide: the largest, kept in document order.
    let mut parts = parts;
    if parts.len() > 6 * part_slides {
        parts.sort_by_key(|p| std::cmp::Reverse(p.2 - p.1));
        parts.truncate(6 * part_slides);
        parts.sort_by_key(|p| p.1);
    }
    let mut out = Vec::new();
    for &f in order {
        match (play, f) {
            (true, 0) => out.push(a.who_is_who()),
            (false, 0) => out.push(a.about()),
            (_, 1) => {
                let runs = runs(&parts, part_slides);
                let longest = runs.iter().map(Vec::len).max().unwrap_or(1).max(1);
                let per = (6 / longest).clamp(1, 3);
                let single = runs.len() == 1;
                for run in runs {
                    let labels: Vec<String> = run.iter().map(|p| heading(&p.0)).collect();
                    let points = a.per_part(&run, per);
                    let what = if play { "The plot" } else { "Main points" };
                    let title = if single {
                        if play {
                            "The plot, act by act".to_owned()
                        } else {
                            "Main points".to_owned()
                        }
                    } else {
                        format!("{what}: {}", span(&labels))
                    };
                    out.push(Facet { title, points });
                }
            }
            (true, 2) => out.push(a.themes(background, 5)),
            (false, 2) => out.push(a.key_terms(background, 5)),
            (true, 3) => out.push(a.key_passages(5)),
            (false, 3) => out.push(a.open_questions(5)),
            _ => {}
        }
    }
    out.retain(|f| !f.points.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAY: &str = "THE TRAGEDY OF TESTING\n\nPERSONS REPRESENTED.\n\nCLAUDIUS, King of Denmark.\nHamlet, Son to the late King.\nGertrude, Queen of Denmark.\n\nACT I.\n\nScene I. A room.\n\nHam.\nThe ghost of my father walks upon the platform tonight, and it speaks of murder.\n\nKing.\nOur brother's death is green in memory, and the crown is ours.\n\nQueen.\nGood Hamlet, cast thy nighted colour off, and look upon the king.\n\nACT II.\n\nScene I. A hall.\n\nHam.\n[Exit Queen.]\nNow I am alone.\nTo be, or not to be, that is the question: whether it is nobler in the mind to suffer the slings and arrows.\nThe play's the thing wherein I'll catch the conscience of the king.\n\nKing.\nMy offence is rank, it smells to heaven; it hath the primal eldest curse upon it.\n";

    fn work(text: &str) -> Work {
        let acts: Vec<usize> = text.match_indices("ACT ").map(|m| m.0).collect();
        Work {
            document: "t.txt".into(),
            title: "The Tragedy of Testing".into(),
            text: text.into(),
            sections: vec![
                ("PERSONS REPRESENTED".into(), 0, acts[0]),
                ("ACT I > Scene I. A room".into(), acts[0], acts[1]),
                ("ACT II > Scene I. A hall".into(), acts[1], text.len()),
            ],
            chunks: vec![(1, 0, text.len())],
        }
    }

    #[test]
    fn a_question_names_speakers_and_whom_it_asks_about() {
        let w = work(PLAY);
        let cast = Cast::of(&w);
        // Who speaks where, by the cast list's names; the cast list itself is front matter.
        let at = |s: &str| PLAY.find(s).unwrap();
        assert_eq!(cast.speaker_at(at("Our brother's death")), Some("Claudius"));
        assert_eq!(cast.speaker_at(at("The play's the thing")), Some("Hamlet"));
        assert_eq!(cast.speaker_at(at("ACT II")), None);
        assert!(cast.in_front(at("Gertrude, Queen")) && !cast.in_front(at("Ham.\nThe ghost")));
        // Named by name, by tag or role (`the king`), with a possessive.
        let named = |q: &str| -> Vec<Vec<&str>> {
            cast.named_in(q).into_iter().map(|(who, _)| who).collect()
        };
        assert_eq!(
            named("Why does the king fear Hamlet's madness?"),
            [vec!["Claudius"], vec!["Hamlet"]]
        );
        assert!(named("What is the play about?").is_empty());
        // What a question asks of them, for a search that the names do not lead.
        assert_eq!(
            without_names("Why does the king fear Hamlet's madness?", [&cast]).as_deref(),
            Some("why does the fear madness")
        );
        assert_eq!(without_names("What is the play about?", [&cast]), None);
        assert_eq!(without_names("Hamlet?", [&cast]), None);
        // Those who speak together (`All.`) are no one a question names by "all".
        let crowd = PLAY.replace(
            "King.\nMy offence",
            "All.\nLong live the king, and long live the queen of Denmark.\n\nKing.\nMy offence",
        );
        let with_all = Cast::of(&work(&crowd));
        assert_eq!(
            with_all.speaker_at(crowd.find("Long live").unwrap()),
            Some("All")
        );
        assert!(with_all.named_in("What do all of them say?").is_empty());
        // The one who acts or speaks, not the one acted on or told of.
        assert_eq!(
            cast.subject_of("What does the King say to Hamlet?"),
            ["Claudius"]
        );
        assert_eq!(
            cast.subject_of("Why does Hamlet test the king?"),
            ["Hamlet"]
        );
        assert!(cast.subject_of("How does Hamlet die?").is_empty());
        assert!(cast.subject_of("How is Hamlet killed?").is_empty());
        assert!(cast.subject_of("What happens to Gertrude?").is_empty());
        assert_eq!(
            cast.subject_of("What do Hamlet and Gertrude say?"),
            ["Hamlet", "Gertrude"]
        );
        assert!(
            cast.subject_of("How do Hamlet and Gertrude die?")
                .is_empty()
        );
        // No play, no cast.
        let text = "A guide to the castle. It has towers and a moat and a long history.";
        let prose = Work {
            document: "guide.md".into(),
            title: "Guide".into(),
            text: text.into(),
            sections: vec![("Guide".into(), 0, text.len())],
            chunks: vec![(1, 0, text.len())],
        };
        assert!(
            Cast::of(&prose)
                .named_in("Who built the castle?")
                .is_empty()
        );
    }

    #[test]
    fn a_death_is_told_by_the_scene_that_shows_it() {
        let play = "THE TRAGEDY OF DYING\n\nPERSONS REPRESENTED.\n\nClaudius, King of \
                    Denmark.\nHamlet, Prince of Denmark.\nPolonius, Lord Chamberlain.\n\
                    Desdemona, a Lady of Venice.\nLear, Father to Cordelia.\nCordelia, \
                    Daughter to Lear.\nHoratio, Friend to Hamlet.\n\nACT I.\n\nScene I. A \
                    closet.\n\nPol.\n[Behind.] What, ho! help, help, help!\n\nHam.\nHow now? a \
                    rat? [Draws.]\nDead for a ducat, dead!\n\n[Makes a pass through the \
                    arras.]\n\nPol.\n[Behind.] O, I am slain!\n\n[Falls and dies.]\n\nHor.\nO \
                    me, what hast thou done?\n\nACT II.\n\nScene I. A bedchamber.\n\nCor.\nNothing, my \
                    lord; I cannot heave my heart into my mouth.\n\nDes.\nKill \
                    me tomorrow; let me live tonight, my lord.\n\nHam.\nIt is too late.\n\n\
                    [Smothers her.]\n\nHor.\nWhat noise is this? Not dead? not yet quite \
                    dead?\n\nDes.\nA guiltless death I die, my lord and friend.\n\nHor.\nO, who \
                    hath done this deed?\n\nDes.\nNobody; I myself. Farewell: Commend me to my \
                    kind lord: O, farewell!\n\n[Dies.]\n\nHam.\nHere, thou incestuous, \
                    murderous, damned Dane, drink off this potion.\n\nKing.\nO, yet defend me, \
                    friends! I am but hurt.\n\nHam.\nFollow my mother to the grave tonight.\n\n\
                    [King dies.]\n\n[Re-enter Lear, with Cordelia dead in his arms.]\n\nLear.\n\
                    Howl, howl, howl, howl! O, you are men of stone.\n\nHor.\nIs this the \
                    promised end of all our sorrows?\n\nHot.\nNo, Percy, thou art dust, and \
                    food for worms.\n\n[Dies.]\n\nLear.\nLay on; and damn'd be him that first \
                    cries, Hold!\n\n[Exeunt fighting.]\n";
        let told = |name: &str, n: usize| {
            death(&work(play), name, n).map(|ps| {
                ps.iter()
                    .enumerate()
                    .map(|(i, p)| {
                        assert_eq!(normalized(&play[p.citation.start..p.citation.end]), p.text);
                        assert_eq!(p.citation.n, i + 1);
                        format!(
                            "{}|{}|{}",
                            p.label.clone().unwrap_or_default(),
                            p.speaker.clone().unwrap_or_default(),
                            p.text
                        )
                    })
                    .collect::<Vec<_>>()
            })
        };
        // The killer's short lines as one quote, the last words with the direction after them,
        // what is said next, and the line before; in the order of the play.
        assert_eq!(
            told("Polonius", 5).unwrap(),
            [
                "|Polonius|What, ho! help, help, help!",
                "|Hamlet|How now? a rat? [Draws.] Dead for a ducat, dead!",
                "Last words, Act I|Polonius|O, I am slain! [Falls and dies.]",
                "|Horatio|O me, what hast thou done?",
            ]
        );
        // The deed that kills her, shown before her death, with the line said as it is done.
        let desdemona = told("desdemona", 5).unwrap();
        assert!(
            desdemona.contains(&"|Hamlet|It is too late. [Smothers her.]".to_owned()),
            "{desdemona:?}"
        );
        assert!(
            desdemona.contains(
                &"Last words, Act II|Desdemona|Farewell: Commend me to my kind lord: O, farewell! \
                  [Dies.]"
                    .to_owned()
            ),
            "{desdemona:?}"
        );
        // A direction naming them (`King dies.`), and the words said between theirs and it.
        let claudius = told("claudius", 3).unwrap();
        assert_eq!(
            claudius,
            [
                "|Hamlet|Here, thou incestuous, murderous, damned Dane, drink off this potion.",
                "Last words, Act II|Claudius|O, yet defend me, friends! I am but hurt.",
                "|Hamlet|Follow my mother to the grave tonight. [King dies.]",
            ]
        );
        // `Re-enter Lear, with Cordelia dead in his arms` is her death, not his; one whose
        // death the play does not show, or no one of the cast, gets none.
        let cordelia = told("Cordelia", 5).unwrap();
        assert!(
            cordelia.contains(&"||[Re-enter Lear, with Cordelia dead in his arms.]".to_owned()),
            "{cordelia:?}"
        );
        // Asked by what the cast list calls them (`Cordelia, Daughter to Lear.`).
        assert_eq!(told("Lear's daughter", 5), Some(cordelia.clone()));
        assert_eq!(told("Horatio", 5), None);
        // One whose death is off stage after a fight: the last sight of them, going off
        // fighting.
        let lear = told("Lear", 5).unwrap();
        assert!(
            lear.contains(
                &"Last words, Act II|Lear|Lay on; and damn'd be him that first cries, Hold! \
                  [Exeunt fighting.]"
                    .to_owned()
            ),
            "{lear:?}"
        );
        assert_eq!(told("Ophelia", 5), None);
        // One the cast list does not name, found by the tag that abbreviates the name asked
        // (`Hot.` for Hotspur, in the cast list as `Henry Percy, his son.`).
        let hotspur = told("Hotspur", 3).unwrap();
        assert!(
            hotspur
                .iter()
                .any(|l| l.starts_with("Last words, Act II|Hot")
                    && l.ends_with("thou art dust, and food for worms. [Dies.]")),
            "{hotspur:?}"
        );
        // Two asked for share the points.
        let both = told("Polonius and Claudius", 4).unwrap();
        assert_eq!(both.len(), 4);
        assert!(
            both[1].starts_with("Last words, Act I|Polonius"),
            "{both:?}"
        );
        assert!(
            both[2].starts_with("Last words, Act II|Claudius"),
            "{both:?}"
        );
        // No play, no death.
        let prose = "A guide to the castle. It has towers and a moat and a long history.";
        let guide = Work {
            document: "guide.md".into(),
            title: "Guide".into(),
            text: prose.into(),
            sections: vec![("Guide".into(), 0, prose.len())],
            chunks: vec![(1, 0, prose.len())],
        };
        assert_eq!(death(&guide, "castle", 5), None);
    }

    #[test]
    fn a_character_is_told_by_cast_list_first_words_set_piece_and_last_words() {
        let play = "THE TRAGEDY OF TESTING\n\nPERSONS REPRESENTED.\n\nHamlet, Prince of \
                    Denmark.\nHoratio, Friend to Hamlet.\nLaertes, Son to Polonius.\n\nACT \
                    I.\n\nScene I. A platform.\n\nHam.\nA little more than kin, and less \
                    than kind.\n\nHor.\nMy lord, the king your father walks tonight upon the \
                    platform.\n\nLaer.\nI will be gone to France tomorrow morning, my good \
                    lord.\n\nACT II.\n\nScene I. A hall.\n\nHam.\nO, I die, Horatio; the \
                    potent poison quite o'er-crows my spirit.\nThe rest is silence.\n\n[Dies.]\n\n\
                    Hor.\nNow cracks a noble heart. Good night, sweet prince.\n";
        let told_in = |play: &str, name: &str, n: usize| {
            profile(&work(play), name, n, None).map(|ps| {
                ps.iter()
                    .map(|p| {
                        assert_eq!(normalized(&play[p.citation.start..p.citation.end]), p.text);
                        format!("{}|{}", p.label.clone().unwrap_or_default(), p.text)
                    })
                    .collect::<Vec<_>>()
            })
        };
        let told = |name: &str, n: usize| told_in(play, name, n);
        assert_eq!(
            told("Hamlet", 6).unwrap(),
            [
                "Cast list|Hamlet, Prince of Denmark.",
                "Cast list|Horatio, Friend to Hamlet.",
                "First words, Act I|A little more than kin, and less than kind.",
                "Act II|O, I die, Horatio; the potent poison quite o'er-crows my spirit.",
                "Last words, Act II|The rest is silence.",
            ]
        );
        // Fewer points: who they are and their first words come first.
        assert_eq!(told("hamlet", 2).unwrap().len(), 2);
        assert!(told("hamlet", 2).unwrap()[1].starts_with("First words"));
        // One who lives has no last words; one not in the cast, or a name that is only part
        // of someone's, has no profile.
        let horatio = told("Horatio", 6).unwrap();
        assert!(
            horatio.iter().all(|l| !l.starts_with("Last words")),
            "{horatio:?}"
        );
        assert_eq!(told("Polonius", 6), None);
        assert_eq!(told("Lady Hamlet", 6), None);
        // A death after what they do first is theirs, a direction opening their line no part
        // of it; one naming another who dies is not.
        let slain = play.replace(
            "Laer.\nI will be gone to France tomorrow morning, my good lord.\n",
            "Laer.\nI will be gone to France tomorrow morning, my good lord.\n\n\
             Laer.\n[Behind.] O, I am slain!\n\n[Falls and dies.]\n",
        );
        let laertes = told_in(&slain, "Laertes", 6).unwrap();
        assert!(
            laertes.contains(&"Last words, Act I|O, I am slain!".to_owned()),
            "{laertes:?}"
        );
        // The words they die on, after the last break in the sentence; a pronoun before the
        // deed; a line after a direction that opens the paragraph is theirs still.
        let sword = slain.replace(
            "[Behind.] O, I am slain!\n\n[Falls and dies.]",
            "Farewell, good Horatio.--France, now be still.\n\n[Sings.] \"Willow.\"\n\n\
             I kill'd not thee with half so good a will.--Farewell.--Now I go to rest.\n\n\
             [He runs on his sword, and dies.]",
        );
        let laertes = told_in(&sword, "Laertes", 6).unwrap();
        assert!(
            laertes.contains(&"Last words, Act I|Now I go to rest.".to_owned()),
            "{laertes:?}"
        );
        let other = slain.replace("[Falls and dies.]", "[Horatio falls and dies.]");
        let laertes = told_in(&other, "Laertes", 6).unwrap();
        assert!(
            laertes.iter().all(|l| !l.starts_with("Last words")),
            "{laertes:?}"
        );
        // A role only one character has names them.
        let king = told_in(PLAY, "the king", 6).unwrap();
        assert_eq!(king[0], "Cast list|CLAUDIUS, King of Denmark.");
        assert!(king.iter().any(|l| l.contains("crown is ours")), "{king:?}");
    }

    #[test]
    fn a_tag_that_begins_two_names_is_the_one_no_other_tag_has() {
        let text = "PERSONS REPRESENTED.\n\nDuke of Cornwall.\nCordelia, daughter to Lear.\n\n";
        let ps = personae(text, text.len());
        assert_eq!(personae_for("Cor", &ps).len(), 2);
        let cast = cast_of(["Cor", "Corn"].into_iter(), &ps);
        assert_eq!(ps[cast["Cor"]].name, "cordelia");
        assert_eq!(ps[cast["Corn"]].name, "duke of cornwall");
        // Alone, the tag keeps the first that fits.
        let cast = cast_of(["Cor"].into_iter(), &ps);
        assert_eq!(ps[cast["Cor"]].name, "duke of cornwall");
    }

    #[test]
    fn one_character_tagged_by_two_titles_is_one_person() {
        let play = "KING RICHARD III\n\nDRAMATIS PERSONAE\n\nRICHARD, DUKE OF YORK\n\
                    RICHARD, DUKE OF GLOSTER, afterwards KING RICHARD III\n\
                    LADY ANNE, widow of Edward, afterwards married to the Duke of Gloster\n\
                    BRAKENBURY, Lieutenant of the Tower\n\nSCENE: England\n\n\
                    King Richard the Third\n\nACT I.\n\nSCENE I. A street\n\nGLOSTER\n\
                    Now is the winter of our discontent made glorious summer by this sun.\n\n\
                    ANNE\nFoul devil, for God's sake, hence, and trouble us not.\n\n\
                    BRAKENBURY\nI know not, my lord, what the king would have of him.\n\n\
                    ACT II.\n\nSCENE I. The palace\n\nKING RICHARD\n\
                    Stand all apart, for I would have a word with the lieutenant now.\n\n\
                    YORK\nI pray you, uncle, give me this dagger for my own.\n";
        let w = work(play);
        let ps = personae(play, play.find("ACT I").unwrap());
        // The title after `SCENE: England` is no one; a relation is no title.
        assert_eq!(ps.len(), 4, "{ps:?}");
        assert_eq!(ps[1].titles, ["duke of gloster", "king richard iii"]);
        assert!(ps[2].titles.is_empty(), "{:?}", ps[2].titles);
        assert_eq!(personae_for("GLOSTER", &ps)[0].line, ps[1].line);
        assert_eq!(personae_for("KING RICHARD", &ps)[0].line, ps[1].line);
        // Asked by name (two Richards: the one who speaks more), by either title, or as the
        // play calls him: his lines under both tags.
        for asked in [
            "Richard",
            "Gloster",
            "King Richard",
            "Richard III",
            "the Duke of Gloster",
        ] {
            let points = profile(&w, asked, 6, None).unwrap_or_else(|| panic!("{asked}"));
            let texts: Vec<&str> = points.iter().map(|p| p.text.as_str()).collect();
            assert!(
                texts[0].starts_with("RICHARD, DUKE OF GLOSTER"),
                "{asked}: {texts:?}"
            );
            assert!(
                texts.iter().any(|t| t.starts_with("Now is the winter")),
                "{texts:?}"
            );
            assert!(
                texts.iter().any(|t| t.starts_with("Stand all apart")),
                "{texts:?}"
            );
        }
    }

    #[test]
    fn a_place_two_entries_are_of_goes_to_the_one_no_other_tag_has() {
        let play = "KING RICHARD III\n\nDRAMATIS PERSONAE\n\nRICHARD, DUKE OF YORK\n\
                    THOMAS ROTHERHAM, ARCHBISHOP OF YORK\n\
                    DUCHESS OF YORK, mother to King Edward IV\n\nSCENE: England\n\n\
                    ACT I.\n\nSCENE I. A street\n\n\
                    DUCHESS\nAccursed and unquiet wrangling days, how many of you have mine eyes beheld!\n\n\
                    ACT II.\n\nSCENE IV. The palace\n\n\
                    ARCHBISHOP\nLast night, I hear, they lay at Stony Stratford.\n\n\
                    YORK\nGrandam, one night as we did sit at supper, my uncle Rivers talked.\n\n\
                    DUCHESS\nI pray thee, pretty York, who told thee this tale of thine uncle?\n\n\
                    YORK\nGrandam, his nurse told it, and she was dead before I was born.\n\n\
                    DUCHESS\nHis nurse! why, she was dead ere thou wast born, my pretty boy.\n";
        let w = work(play);
        let a = Analysis::new(&w);
        // `YORK` fits the Duchess by her name and the boy by his title; `DUCHESS` is hers.
        assert_eq!(a.speaker_name("YORK"), "Richard");
        assert_eq!(a.speaker_name("DUCHESS"), "Duchess of York");
        let points = profile(&w, "the Duke of York", 4, None).expect("the boy is found");
        assert!(
            points[0].text.starts_with("RICHARD, DUKE OF YORK"),
            "{points:?}"
        );
        assert!(
            points[1..]
                .iter()
                .all(|p| p.text.starts_with("Grandam") && p.speaker.as_deref() == Some("Richard")),
            "{points:?}"
        );
    }

    #[test]
    fn speakers_are_matched_to_the_cast_list() {
        let ps = personae(PLAY, PLAY.find("ACT I").unwrap());
        let name = |tag: &str| persona_for(tag, &ps).map(|p| p.display(PLAY));
        assert_eq!(name("Ham").as_deref(), Some("Hamlet"));
        // A lord of Act V is not Polonius, the Lord Chamberlain; the King is Claudius.
        let court = "HAMLET\n\nPERSONS REPRESENTED.\n\nPolonius, Lord Chamberlain.\n\
                     Claudius, King of Denmark.\n\nACT I.";
        let cs = personae(court, court.find("ACT I").unwrap());
        assert_eq!(cs.len(), 2, "{cs:?}");
        assert!(persona_for("Lord", &cs).is_none(), "{cs:?}");
        assert_eq!(
            persona_for("King", &cs)
                .map(|p| p.display(court))
                .as_deref(),
            Some("Claudius")
        );
        assert_eq!(name("King").as_deref(), Some("Claudius"));
        assert_eq!(name("Queen").as_deref(), Some("Gertrude"));
        assert_eq!(name("Fran"), None);
        assert_eq!(speeches(PLAY).len(), 5);
    }

    #[test]
    fn a_soliloquy_after_an_exit_goes_on_with_its_speaker() {
        let text = "Ros.\nWill't please you go, my lord?\n\nHam.\nGo a little before.\n\n\
                    [Exeunt all but Hamlet.]\n\nHow all occasions do inform against me\nAnd spur \
                    my dull revenge!\n\nACT V.\n\nScene I. A churchyard.\n\n[Enter two \
                    Clowns.]\n\nA paragraph of notes, not a speech.\n";
        let s = speeches(text);
        let said: Vec<(&str, &str)> = s
            .iter()
            .map(|s| (s.speaker.as_str(), &text[s.start..s.end]))
            .collect();
        assert_eq!(
            said,
            [
                ("Ros", "Will't please you go, my lord?"),
                (
                    "Ham",
                    "Go a little before.\n\n[Exeunt all but Hamlet.]\n\nHow all occasions do \
                     inform against me\nAnd spur my dull revenge!"
                ),
            ]
        );
    }

    #[test]
    fn who_is_on_stage_follows_the_directions() {
        let play = "Scene I. A hall.\n\n[Enter Lear, Gloster, Kent, and Attendants.]\n\n\
                    Glou.\nI shall, my liege.\n\n[Exeunt Gloster and Attendants.]\n\n\
                    Lear.\nMeantime we shall express our darker purpose.\n\n\
                    Kent.\nGood my liege.\n\n[Exit.]\n\n\
                    Lear.\nNow I am alone, and this is what I think.\n\n\
                    Scene II. A heath.\n\n[Enter Lear and First Player.]\n\n\
                    I Play.\nAy, my lord.\n\n[Exit First Player.]\n\n\
                    Lear.\nBlow, winds, and crack your cheeks.\n\n\
                    [Enter Kent and others.]\n\n\
                    Kent.\nSir.\n\n[Exeunt Kent, &c.]\n\n\
                    Lear.\nAlone again at last.\n";
        let sp = speeches(play);
        let who: Vec<&str> = sp.iter().map(|s| s.speaker.as_str()).collect();
        assert_eq!(
            who,
            [
                "Glou", "Lear", "Kent", "Lear", "I Play", "Lear", "Kent", "Lear"
            ]
        );
        let personae = [Persona {
            name: "earl of gloster".into(),
            role: String::new(),
            titles: Vec::new(),
            line: (0, 0),
            name_at: (0, 0),
            desc_at: 0,
        }];
        // `Gloster` leaves by name (the tag is `Glou.`), Kent by a bare `[Exit.]` after his
        // speech, the player by his full name; `&c.` empties the stage.
        assert_eq!(
            alone_on_stage(play, &sp, &personae, &HashMap::new()),
            [false, false, false, true, false, true, false, true]
        );
    }

    #[test]
    fn directions_that_show_a_deed_are_found() {
        let text = "Corn.\nOut, vile jelly!\n\n[Tears out Gloster's other eye.]\n\n\
                    Pol.\nO, I am slain!\n\n[Falls and dies.]\n\n[Enter the Ghost.]\n\n\
                    [Reads.]\n[Exeunt, bearing off the dead bodies.]\n[Kneeling.]\n";
        let found: Vec<&str> = deeds(text)
            .into_iter()
            .map(|at| &text[at..direction_end(text, at)])
            .collect();
        assert_eq!(
            found,
            ["[Tears out Gloster's other eye.]", "[Falls and dies.]"]
        );
        // A direction left open ends at the blank line: the deaths spoken of after it are
        // not its deeds, and the direction that does close is still read.
        let open = "[Retreat. Flourish. Enter, with drum and colours, Malcolm.\n\n\
                    Mal.\nSome must go off; Siward is dead, and your son is slain.\n\n\
                    [Stabs himself.]\n";
        let found: Vec<&str> = deeds(open)
            .into_iter()
            .map(|at| &open[at..direction_end(open, at)])
            .collect();
        assert_eq!(found, ["[Stabs himself.]"]);
    }

    #[test]
    fn a_deed_is_told_by_the_one_who_does_or_suffers_it() {
        let w = work(PLAY);
        let a = Analysis::new(&w);
        assert!(a.is_play());
        assert!(a.does("Ham", "Dies."));
        assert!(a.does("Ham", "He dies."));
        // Named by cast-list name or by tag.
        assert!(a.does("King", "Claudius stabs the spy."));
        assert!(a.does("Queen", "The Queen falls."));
        // Not one who is not named, nor an unnamed fall or binding.
        assert!(!a.does("Queen", "Claudius stabs the spy."));
        assert!(!a.does("Ham", "Falls."));
        assert!(!a.does("Ham", "Servants bind him."));
    }

    #[test]
    fn a_short_speech_said_as_a_deed_is_done_is_quoted_whole() {
        let text = format!(
            "{PLAY}\nQueen.\nEt tu, Brute?-- Then fall, Caesar!\n\n[Dies.]\n\n\
             King.\nWhy so? Go now.\n\nHam.\nAway! Go, go!\n"
        );
        let w = work(&text);
        let a = Analysis::new(&w);
        let said: Vec<&str> = a
            .candidates((0, text.len()))
            .into_iter()
            .map(|(r, _)| &text[r.0..r.1])
            .collect();
        assert!(
            said.contains(&"Et tu, Brute?-- Then fall, Caesar!"),
            "{said:?}"
        );
        assert!(!said.contains(&"Why so? Go now."), "{said:?}");
    }

    #[test]
    fn a_word_names_a_theme_by_its_stem_but_not_a_shorter_word() {
        let fate = "fate fortune prophecy destiny stars";
        assert!(names_theme("fates", fate) && names_theme("Fortunes", fate));
        assert!(!names_theme("fat", fate));
        let sight = "eyes blind sight";
        assert!(names_theme("eye", sight) && names_theme("blinded", sight));
        assert!(names_theme(
            "revenging",
            "revenge revenged vengeance avenge"
        ));
    }

    #[test]
    fn a_tag_names_one_character_or_none() {
        let cast = "PERSONS REPRESENTED.\n\nDUKE OF EXETER, uncle to the King.\nKING HENRY V.\n\
                    CLAUDIUS, Uncle of Hamlet.\nFLEANCE, Son to Banquo.\nBOY, Son to Macduff.\n\
                    Senators, Citizens, Soldiers.\n\nACT I.\n";
        let ps = personae(cast, cast.find("ACT I").unwrap());
        let name = |tag: &str| persona_for(tag, &ps).map(|p| p.name.clone());
        assert_eq!(name("KING HENRY").as_deref(), Some("king henry v"));
        // By role only when one character has it: two are an uncle.
        assert_eq!(name("Uncle"), None);
        assert_eq!(name("Fleance").as_deref(), Some("fleance"));
        // Two are a son: the tag names neither. A crowd is no one in the list.
        assert_eq!(name("SON"), None);
        assert_eq!(name("CITIZENS"), None);
    }

    #[test]
    fn a_cast_list_entry_is_one_name_whatever_its_lines() {
        let cast = "PERSONS REPRESENTED\n\nMARCUS BRUTUS, Conspirator against Caesar.\n\
                    CASSIUS,             \"          \"     \"\nVARRO, CLITUS, Servants to\n\
                    Brutus\nLUCILIUS, TITINIUS, Friends\nto Brutus and Cassius.\n\nACT I.\n";
        let ps = personae(cast, cast.find("ACT I").unwrap());
        let quoted: Vec<&str> = ps.iter().map(|p| &cast[p.line.0..p.line.1]).collect();
        assert_eq!(
            quoted,
            [
                "MARCUS BRUTUS, Conspirator against Caesar.",
                "CASSIUS",
                "VARRO, CLITUS, Servants to",
                "VARRO, CLITUS, Servants to",
                "LUCILIUS, TITINIUS, Friends",
                "LUCILIUS, TITINIUS, Friends",
            ]
        );
        // A line that names several gives each their own name and the description they share.
        let names: Vec<String> = ps.iter().map(|p| p.display(cast)).collect();
        assert_eq!(
            names,
            [
                "Marcus Brutus",
                "Cassius",
                "Varro",
                "Clitus",
                "Lucilius",
                "Titinius"
            ]
        );
        assert_eq!(ps[5].role, "friends");
        assert_eq!(ps[5].description(cast), "friends");
        assert_eq!(ps[0].description(cast), ", conspirator against caesar.");
        assert_eq!(
            persona_for("TITINIUS", &ps).map(|p| p.name.as_str()),
            Some("titinius")
        );
        assert_eq!(
            persona_for("BRUTUS", &ps).map(|p| p.name.as_str()),
            Some("marcus brutus")
        );
        fn split(line: &str) -> Option<Vec<&str>> {
            shared_line(line).map(|(ns, d)| {
                let mut v: Vec<&str> = ns.iter().map(|&(a, b)| &line[a..b]).collect();
                v.push(&line[d..]);
                v
            })
        }
        assert_eq!(
            split("LUCILIUS, TITINIUS, MESSALA, young CATO, and VOLUMNIUS, Friends"),
            Some(vec![
                "LUCILIUS",
                "TITINIUS",
                "MESSALA",
                "young CATO",
                "VOLUMNIUS",
                "Friends"
            ])
        );
        assert_eq!(
            split("TRAVERS and MORTON, retainers of Northumberland."),
            Some(vec!["TRAVERS", "MORTON", "retainers of Northumberland."])
        );
        // One person: a rank, a place, another name they go by, or names in mixed case.
        for one in [
            "RICHARD, DUKE OF GLOSTER, afterwards KING RICHARD III",
            "JOHN MORTON, BISHOP OF ELY",
            "PUCK, or ROBIN GOODFELLOW, a Fairy.",
            "CLAUDIUS, King of Denmark.",
            "Voltimand, Cornelius, courtiers.",
            "JULIUS CAESAR",
        ] {
            assert_eq!(split(one), None, "{one}");
        }
        // A rank in a tag is a role before it is a word of someone's name.
        let cast = "Dramatis Personae\n\nKing Henry the Fourth.\nHenry, Prince of Wales, son to \
                    the King.\nPrince John of Lancaster, son to the King.\nLords attending on \
                    the KING; Officers.\nGarter King-at-Arms\n";
        let ps = personae(cast, cast.len());
        let name = |tag: &str| persona_for(tag, &ps).map(|p| p.name.as_str());
        assert_eq!(name("Prince"), Some("henry"));
        assert_eq!(name("King"), Some("king henry the fourth"));
        assert_eq!(name("Lancaster"), Some("prince john of lancaster"));
        assert_eq!(name("Lords"), None);
        let cast = "PERSONS REPRESENTED.\n\nM.ANTONY,          Triumvir\nSEXTUS POMPEIUS    \
                    Triumvir\n";
        let ps = personae(cast, cast.len());
        assert_eq!(ps[1].name, "sextus pompeius");
        assert_eq!(ps[1].display(cast), "Sextus Pompeius");
        assert_eq!(
            persona_for("ANTONY", &ps).map(|p| p.name.as_str()),
            Some("m.antony")
        );
    }

    #[test]
    fn a_tag_in_capitals_needs_no_period_but_a_numeral_or_a_song_is_no_tag() {
        let text = "THESEUS\nNow, fair Hippolyta, our nuptial hour draws on.\n\n\
                    Hip.\nFour days will quickly steep themselves in nights.\n\n\
                    XVIII\nShall I compare thee to a summer's day?\n\n\
                    SONG\nWedding is great Juno's crown.\n";
        let tags: Vec<String> = speeches(text).into_iter().map(|s| s.speaker).collect();
        assert_eq!(tags, ["THESEUS", "Hip"]);
    }

    #[test]
    fn a_song_ends_the_speech_before_it() {
        let text = "PROSPERO.\nSo, slave: hence!\n\n[ARIEL'S SONG.]\n\nCome unto these yellow sands.\n\n\
                    BRUTUS.\nIt was well done.\n\n[Lucius plays and sings till he falls asleep.]\n\n\
                    This is a sleepy tune.\n";
        let sp = speeches(text);
        let said: Vec<(&str, &str)> = sp
            .iter()
            .map(|s| (s.speaker.as_str(), &text[s.start..s.end]))
            .collect();
        assert_eq!(said[0], ("PROSPERO", "So, slave: hence!"));
        assert_eq!(said[1].0, "BRUTUS");
        assert!(
            said[1].1.ends_with("This is a sleepy tune."),
            "{:?}",
            said[1]
        );
        assert_eq!(said.len(), 2);
    }

    #[test]
    fn a_speech_goes_on_after_a_direction_on_the_line_before() {
        // Titinius alone after `[Exit Messala.]`, the direction on the first line of the
        // paragraph his soliloquy goes on in; not a song, nor the next speaker's tag.
        let text = "TITINIUS.\nHie you, Messala.\n\n[Exit Messala.]\nWhy didst thou send me \
                    forth?\nCome, Cassius' sword.\n\n[Dies.]\n\nPROSPERO.\nHence!\n\n\
                    [ARIEL'S SONG.]\nCome unto these yellow sands.\n\nBRUTUS.\nWell done.\n\n\
                    [Exit Lucius.]\nCASSIUS.\nIt is.\n";
        let sp = speeches(text);
        let said: Vec<(&str, &str)> = sp
            .iter()
            .map(|s| (s.speaker.as_str(), &text[s.start..s.end]))
            .collect();
        assert_eq!(
            said,
            [
                (
                    "TITINIUS",
                    "Hie you, Messala.\n\n[Exit Messala.]\nWhy didst thou send me forth?\n\
                     Come, Cassius' sword."
                ),
                ("PROSPERO", "Hence!"),
                ("BRUTUS", "Well done."),
            ]
        );
    }

    #[test]
    fn a_speech_that_calls_on_an_absent_power_is_told_from_one_to_the_stage() {
        for call in [
            "Blow, winds, and crack your cheeks! rage! blow!",
            "Thou, nature, art my goddess; to thy law My services are bound.",
            "O you gods!",
            "Hear, nature, hear; dear goddess, hear!",
            "You gods, reward them!",
        ] {
            assert!(calls_on_absent(call), "{call}");
        }
        for talk in [
            "Good day, sir.",
            "Good night, sweet prince;",
            "The night is long that never finds the day.",
            "It may be so, my lord.",
        ] {
            assert!(!calls_on_absent(talk), "{talk}");
        }
    }

    /// The sentences of a speech, as text.
    fn spoken(text: &str) -> Vec<&str> {
        sentences(text, 0, text.len(), true)
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect()
    }

    #[test]
    fn in_verse_a_lower_case_word_after_an_exclamation_goes_on_with_the_sentence() {
        let text = "Kent banish'd thus! and France in choler parted!
Now I am alone. O, what a rogue!";
        assert_eq!(
            spoken(text),
            [
                "Kent banish'd thus! and France in choler parted!",
                "Now I am alone.",
                "O, what a rogue!"
            ]
        );
        // Prose outside a play splits as before.
        assert_eq!(sentences(text, 0, text.len(), false).len(), 4);
    }

    #[test]
    fn an_entrance_alone_is_told_from_one_with_others() {
        assert!(enters_alone("\n[Enter Edmund with a letter.]\n\n", "Edm"));
        assert!(enters_alone(
            "[Exeunt.]\n\nSCENE II.\n\n[Enter Othello.]\n",
            "OTHELLO"
        ));
        assert!(enters_alone(
            "[Enter Lady Macbeth, reading a letter.]",
            "LADY MACBETH"
        ));
        assert!(!enters_alone("[Enter Lear and Fool.]", "Lear"));
        assert!(!enters_alone("[Enter Lear, Kent, and Fool.]", "Lear"));
        assert!(!enters_alone("[Enter Edmund, Cornwall, Regan.]", "Edm"));
        assert!(!enters_alone("[Enter Kent.]", "Lear"));
        assert!(!enters_alone("no entrance here", "Lear"));
    }

    #[test]
    fn what_a_line_quotes_is_not_its_own_word() {
        assert_eq!(
            unquoted("Come:--'The croaking raven doth bellow for revenge.'"),
            "Come:--"
        );
        assert_eq!(
            unquoted("He said \"Go away!\" and left."),
            "He said  and left."
        );
        // Elisions and apostrophes stay.
        for kept in [
            "'Tis now the very witching time of night.",
            "Our brother's death, 'twere well it were done quickly.",
            "'Gainst self-slaughter! the fathers' graves.",
        ] {
            assert_eq!(unquoted(kept), kept);
        }
    }

    #[test]
    fn long_sentences_are_abridged_at_a_clause_end_and_stay_verbatim() {
        let s = "To be, or not to be, that is the question: whether it is nobler in the mind to suffer the slings and arrows of outrageous fortune.";
        let ((a, b), cut) = abridge(s, (0, s.len()), 12);
        assert!(cut);
        assert_eq!(&s[a..b], "To be, or not to be, that is the question:");
        let ((_, b), cut) = abridge(s, (0, 20), 12);
        assert!(!cut && b == 20);
        // Not at a lead-in's colon.
        let s = "Therefore I will, sir, thus: If Alcibiades kill my countrymen, Let Alcibiades \
                 know this of Timon, That Timon cares not.";
        let ((a, b), _) = abridge(s, (0, s.len()), 18);
        assert_eq!(
            &s[a..b],
            "Therefore I will, sir, thus: If Alcibiades kill my countrymen, Let Alcibiades \
             know this of Timon,"
        );
        // Before this edition's dashes, not after them.
        let s = "To be, or not to be,--that is the question:--\nWhether 'tis nobler in the mind \
                 to suffer The slings and arrows of outrageous fortune";
        let ((a, b), _) = abridge(s, (0, s.len()), 12);
        assert_eq!(&s[a..b], "To be, or not to be,--that is the question:");
        let s = "Though this be madness, yet there is a method in't.--";
        assert_eq!(
            spoken(s),
            ["Though this be madness, yet there is a method in't."]
        );
    }

    /// Knows by heart the lines that say so, and no others.
    struct Heart;

    impl Reader for Heart {
        fn familiarity(&self, _lead: &str, lines: &[&str]) -> Option<Vec<f32>> {
            Some(
                lines
                    .iter()
                    .map(|l| if l.contains("by heart") { -1.0 } else { -4.0 })
                    .collect(),
            )
        }
    }

    /// Returns one value too few.
    struct Short;

    impl Reader for Short {
        fn familiarity(&self, _lead: &str, lines: &[&str]) -> Option<Vec<f32>> {
            Some(vec![-1.0; lines.len().saturating_sub(1)])
        }
    }

    #[test]
    fn a_reader_brings_the_passages_it_knows_forward_and_quotes_them_where_it_knows_them() {
        // Eight speeches by eight speakers, four an act, each shorter than the one before; the
        // one at `known` holds lines known by heart on its third and fourth lines.
        let play = |known: usize| {
            let mut play = String::from(
                "THE TRAGEDY OF READING\n\nPERSONS REPRESENTED.\n\nAnna, a queen.\nBruno, a \
                 king.\nCarla, a nurse.\nDario, a guard.\nElsa, a maid.\nFabio, a fool.\n\
                 Gina, a cook.\nHugo, a page.\n\n",
            );
            let names = [
                "ANNA", "BRUNO", "CARLA", "DARIO", "ELSA", "FABIO", "GINA", "HUGO",
            ];
            for (i, name) in names.iter().enumerate() {
                match i {
                    0 => play.push_str("ACT I.\n\nScene I. A hall.\n\n"),
                    4 => play.push_str("ACT II.\n\nScene I. A yard.\n\n"),
                    _ => {}
                }
                play.push_str(&format!("{name}.\n"));
                for l in 0..14 - i {
                    if i == known && (l == 2 || l == 3) {
                        play.push_str("These are the words the whole world has learnt by heart,\n");
                    } else {
                        play.push_str(&format!(
                            "Line {l} of {name}, that nobody remembers, my lord.\n"
                        ));
                    }
                }
                play.push('\n');
            }
            let acts: Vec<usize> = play.match_indices("ACT ").map(|m| m.0).collect();
            Work {
                document: "r.txt".into(),
                title: "The Tragedy of Reading".into(),
                sections: vec![
                    ("PERSONS REPRESENTED".into(), 0, acts[0]),
                    ("ACT I > Scene I. A hall".into(), acts[0], acts[1]),
                    ("ACT II > Scene I. A yard".into(), acts[1], play.len()),
                ],
                chunks: vec![(1, 0, play.len())],
                text: play,
            }
        };
        let passages = |w: &Work, reader: Option<&dyn Reader>| {
            let mut a = Analysis::new(w).with_reader(reader);
            let f = a.key_passages(2);
            f.points
                .iter()
                .map(|p| {
                    assert_eq!(
                        normalized(&w.text[p.citation.start..p.citation.end]),
                        p.text
                    );
                    format!("{}|{}", p.speaker.clone().unwrap_or_default(), p.text)
                })
                .collect::<Vec<_>>()
        };
        // Without a reader: the longest speech of each act, from its opening.
        let w = play(6);
        let plain = passages(&w, None);
        assert_eq!(plain.len(), 2);
        assert!(plain[0].starts_with("Anna|Line 0 of ANNA"), "{plain:?}");
        assert!(plain[1].starts_with("Elsa|Line 0 of ELSA"), "{plain:?}");
        // The known speech comes forward, quoted where it is known.
        let read = passages(&w, Some(&Heart));
        assert!(read[0].starts_with("Anna|Line 0 of ANNA"), "{read:?}");
        assert!(
            read[1].starts_with("Gina|These are the words the whole world has learnt by heart"),
            "{read:?}"
        );
        // But not before the ranking's first: known in its act, it waits.
        let w = play(2);
        assert_eq!(passages(&w, Some(&Heart)), passages(&w, None));
        // A reader that answers for fewer lines than it was given is not heard.
        let w = play(6);
        assert_eq!(passages(&w, Some(&Short)), plain);
    }

    #[test]
    fn a_play_gets_cast_plot_and_passages_all_cited_verbatim() {
        let w = work(PLAY);
        let fs = facets(&w, &Counts::default(), 3, None);
        let titles: Vec<&str> = fs.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(
            titles,
            ["Who's who", "The plot, act by act", "Key passages"]
        );
        assert_eq!(fs[0].points[0].text, "Hamlet, Son to the late King.");
        let acts: HashSet<_> = fs[1]
            .points
            .iter()
            .map(|p| p.label.clone().unwrap())
            .collect();
        assert_eq!(
            acts,
            HashSet::from(["Act I".to_owned(), "Act II".to_owned()])
        );
        // The set piece starts after the exit and the short line.
        let passage = &fs[2].points.iter().find(|p| p.abridged).unwrap();
        assert_eq!(passage.text, "To be, or not to be, that is the question:");
        let mut seen = HashSet::new();
        for p in fs.iter().flat_map(|f| &f.points) {
            let c = &p.citation;
            assert_eq!(normalized(&PLAY[c.start..c.end]), p.text);
            assert!(seen.insert((c.start, c.end)), "{} twice", p.text);
            assert!(p.text.split_whitespace().count() <= MAX_WORDS);
        }
    }

    proptest::proptest! {
        /// Any text (plays, prose, Markdown, binary junk, multi-byte characters) gives facets
        /// without a panic, and every point quotes the text at its citation.
        #[test]
        fn any_text_gives_verbatim_facets(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("[A-Za-zé' ,;:.!?\\[\\]-]{0,60}").unwrap(),
                    proptest::strategy::Just("\n".to_owned()),
                    proptest::strategy::Just("\n\n".to_owned()),
                    proptest::strategy::Just("\n\nHam.\n".to_owned()),
                    proptest::strategy::Just("\n\nACT II.\n\n".to_owned()),
                    proptest::strategy::Just("\n## Part\n".to_owned()),
                ],
                0..60,
            ),
            slides in 1usize..8,
        ) {
            let text: String = pieces.concat();
            let mid = text.len() / 2;
            let mid = boundary(&text, mid);
            let w = Work {
                document: "t".into(),
                title: "T".into(),
                text: text.clone(),
                sections: vec![("ACT I".into(), 0, mid), ("ACT II".into(), mid, text.len())],
                chunks: vec![(1, 0, text.len())],
            };
            let mut background = Counts::default();
            background.merge(&Counts::of("the king is dead, long live the king"));
            for f in facets(&w, &background, slides, None) {
                for p in &f.points {
                    let c = &p.citation;
                    proptest::prop_assert_eq!(normalized(&text[c.start..c.end]), p.text.clone());
                    proptest::prop_assert!(p.text.split_whitespace().count() <= MAX_WORDS);
                }
            }
        }
    }

    #[test]
    fn acts_are_spanned_by_name() {
        assert_eq!(span(&["Act I".into(), "Act II".into()]), "Acts I-II");
        assert_eq!(span(&["Act III".into()]), "Act III");
        assert_eq!(runs(&[1, 2, 3, 4, 5], 2), vec![vec![1, 2, 3], vec![4, 5]]);
    }
}
