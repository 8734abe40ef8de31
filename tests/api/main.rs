//! The in-process tests: somna used as a library, one file per invariant (each opens with a
//! `//!` paragraph saying what it guards). One test binary, so that a library change rebuilds
//! one test crate, not fifteen; the tests that run the real `somna` binary are in `tests/cli/`.
//!
//! Run one group with `cargo test --release --test api crash::`, one file with
//! `cargo test --release --test api crash::power_loss`.

mod backend;
mod layers;

mod store {
    mod cover_props;
    mod edges;
    mod golden_format;
    mod golden_journal;
    mod group_commit;
    mod journal;
    mod key_order;
    mod model;
    mod pending_props;
    mod recall_pages;
    mod table_types;
}

mod crash {
    mod full_disk;
    mod group_commit;
    mod io_errors;
    mod journal_power_loss;
    mod journaled_commit;
    mod migration;
    mod one_phase;
    mod power_loss;
    mod torn_tail;
}

mod checkpoint {
    mod storage;
}
mod security {
    mod argument_lists;
    mod recall_words;
}
mod search {
    mod behaviour;
    mod conformance;
    mod golden_format2;
    mod golden_format6;
    mod golden_format7;
    mod index_props;
    mod vector_cache;
}

mod session {
    mod contract;
    mod golden_format2;
    mod golden_format3;
    mod model;
    mod verify;
}

mod trust {
    mod authorization_props;
    mod detectors;
    mod scenarios;
}
