//! English irregular verbs: the forms a verb takes that a stemmer cannot bring to its base
//! (`went` and `gone` for `go`), so that a query asking in the base form ("when did she go")
//! finds memories that say it in the past ("she went"). Used by
//! [`crate::domain::tokenize::query_term_forms`]: a query word that is the base form of one of
//! these verbs also matches its other forms, counted as one term. Only the base form expands:
//! many past forms are also other words (`left`, `found`, `saw`, `felt`, `ground`), and a
//! question that uses the base form almost always means the verb.
//!
//! No well-kept Rust crate carries this table (the lemmatizer crates load a dictionary file at run
//! time or are unmaintained), and it is English grammar, not data: the common irregular verbs of
//! any English grammar's list, without `be`, `have` and `do` (stop words, never query terms), and
//! without verbs whose forms are all the same (`put`, `cut`, `set`: the stemmer needs no help).
//! The third-person forms of the two verbs in -o (`goes`, `undergoes`) are listed too: Snowball
//! does not bring them to the base's stem. Measured on LoCoMo: docs/performance.md, "Ranked
//! search".

/// Each verb's base form, then its other forms; sorted by the base form.
#[rustfmt::skip]
const VERBS: &[&[&str]] = &[
    &["arise", "arose", "arisen"], &["awake", "awoke", "awoken"],
    &["bear", "bore", "borne", "born"], &["beat", "beaten"], &["become", "became"],
    &["begin", "began", "begun"], &["bend", "bent"], &["bind", "bound"],
    &["bite", "bit", "bitten"], &["bleed", "bled"], &["blow", "blew", "blown"],
    &["break", "broke", "broken"], &["breed", "bred"], &["bring", "brought"], &["build", "built"],
    &["burn", "burnt"], &["buy", "bought"], &["catch", "caught"], &["choose", "chose", "chosen"],
    &["cling", "clung"], &["come", "came"], &["creep", "crept"], &["deal", "dealt"],
    &["dig", "dug"], &["dive", "dove"], &["draw", "drew", "drawn"], &["dream", "dreamt"],
    &["drink", "drank", "drunk"], &["drive", "drove", "driven"], &["eat", "ate", "eaten"],
    &["fall", "fell", "fallen"], &["feed", "fed"], &["feel", "felt"], &["fight", "fought"],
    &["find", "found"], &["flee", "fled"], &["fly", "flew", "flown"],
    &["forbid", "forbade", "forbidden"], &["forget", "forgot", "forgotten"],
    &["forgive", "forgave", "forgiven"], &["freeze", "froze", "frozen"], &["get", "got", "gotten"],
    &["give", "gave", "given"], &["go", "went", "gone", "goes"], &["grind", "ground"],
    &["grow", "grew", "grown"], &["hang", "hung"], &["hear", "heard"], &["hide", "hid", "hidden"],
    &["hold", "held"], &["keep", "kept"], &["kneel", "knelt"], &["know", "knew", "known"],
    &["lay", "laid"], &["lead", "led"], &["lean", "leant"], &["leap", "leapt"],
    &["learn", "learnt"], &["leave", "left"], &["lend", "lent"], &["lie", "lay", "lain"],
    &["light", "lit"], &["lose", "lost"], &["make", "made"], &["mean", "meant"], &["meet", "met"],
    &["mislead", "misled"], &["overcome", "overcame"], &["pay", "paid"], &["prove", "proven"],
    &["ride", "rode", "ridden"], &["ring", "rang", "rung"], &["rise", "rose", "risen"],
    &["run", "ran"], &["say", "said"], &["see", "saw", "seen"], &["seek", "sought"],
    &["sell", "sold"], &["send", "sent"], &["sew", "sewn"], &["shake", "shook", "shaken"],
    &["shine", "shone"], &["shoot", "shot"], &["show", "shown"], &["shrink", "shrank", "shrunk"],
    &["sing", "sang", "sung"], &["sink", "sank", "sunk"], &["sit", "sat"], &["sleep", "slept"],
    &["slide", "slid"], &["speak", "spoke", "spoken"], &["speed", "sped"], &["spend", "spent"],
    &["spin", "spun"], &["spring", "sprang", "sprung"], &["stand", "stood"],
    &["steal", "stole", "stolen"], &["stick", "stuck"], &["sting", "stung"],
    &["stink", "stank", "stunk"], &["strike", "struck"], &["string", "strung"],
    &["strive", "strove", "striven"], &["swear", "swore", "sworn"], &["sweep", "swept"],
    &["swim", "swam", "swum"], &["swing", "swung"], &["take", "took", "taken"],
    &["teach", "taught"], &["tear", "tore", "torn"], &["tell", "told"], &["think", "thought"],
    &["throw", "threw", "thrown"], &["undergo", "underwent", "undergone", "undergoes"],
    &["understand", "understood"], &["undertake", "undertook", "undertaken"],
    &["wake", "woke", "woken"], &["wear", "wore", "worn"], &["weave", "wove", "woven"],
    &["weep", "wept"], &["win", "won"], &["wind", "wound"], &["withdraw", "withdrew", "withdrawn"],
    &["write", "wrote", "written"],
];

/// The forms of the verb whose base form is `word` (the base form first), or `None` when `word`
/// is not the base form of an irregular verb of the table. `word` is a case-folded word.
pub fn forms(word: &str) -> Option<&'static [&'static str]> {
    let i = VERBS
        .binary_search_by(|v| v.first().copied().unwrap_or("").cmp(word))
        .ok()?;
    VERBS.get(i).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_by_base_form_with_other_forms() {
        for pair in VERBS.windows(2) {
            assert!(
                pair[0][0] < pair[1][0],
                "{:?} before {:?}",
                pair[0],
                pair[1]
            );
        }
        for v in VERBS {
            assert!(v.len() >= 2, "{v:?} has no other form");
            assert!(v
                .iter()
                .all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase())));
        }
    }

    #[test]
    fn a_base_form_gives_its_forms_and_nothing_else_does() {
        assert_eq!(forms("go"), Some(&["go", "went", "gone", "goes"][..]));
        assert_eq!(forms("buy"), Some(&["buy", "bought"][..]));
        assert_eq!(forms("went"), None);
        assert_eq!(forms("left"), None);
        assert_eq!(forms("walk"), None);
        assert_eq!(forms(""), None);
    }
}
