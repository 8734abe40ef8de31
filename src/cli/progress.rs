//! Progress on long work, on stderr: a bar with the count, rate and ETA when the total is known,
//! a spinner with the count (or what is being done) when not. Drawn only when stderr is a
//! terminal and the output is not `--json`, so pipes, JSON consumers and CI logs never see it;
//! cleared when the work ends, so a terminal keeps only the command's own lines.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar or spinner, or nothing (not a terminal, or `--json`). Cleared when dropped.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// Starts a bar over `total` items, or a spinner when `total` is `None`, labelled `what`.
    pub fn start(json: bool, total: Option<u64>, what: &str) -> Progress {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        if json || dumb || !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let (pb, template) = match total {
            Some(n) => (
                ProgressBar::new(n),
                "{msg} [{bar:30}] {pos}/{len} ({per_sec}, ETA {eta})",
            ),
            None => (
                ProgressBar::new_spinner(),
                "{spinner} {msg} {pos} ({elapsed})",
            ),
        };
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        pb.set_style(style);
        pb.set_draw_target(ProgressDrawTarget::stderr());
        pb.set_message(what.to_string());
        pb.enable_steady_tick(Duration::from_millis(100));
        pb.tick();
        Progress(Some(pb))
    }

    /// Counts `n` more items done.
    pub fn inc(&self, n: u64) {
        if let Some(pb) = &self.0 {
            pb.inc(n);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}

/// A writer that counts the lines written through it on a [`Progress`] (for `export`).
pub struct CountLines<'a> {
    pub inner: &'a mut dyn std::io::Write,
    pub progress: &'a Progress,
}

impl std::io::Write for CountLines<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        let lines = buf.iter().take(n).filter(|&&b| b == b'\n').count();
        self.progress.inc(lines as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// [`somna::Options::on_upgrade`] drawing a bar (on a terminal, not with `--json`) while the
/// first read-write open of an older store builds its search index, cleared when it is built.
pub fn on_upgrade(opts: somna::Options, json: bool) -> somna::Options {
    let bar: std::sync::Mutex<Option<Progress>> = std::sync::Mutex::new(None);
    opts.on_upgrade(move |done, all| {
        if let Ok(mut b) = bar.lock() {
            let what = "building the search index: scopes";
            b.get_or_insert_with(|| Progress::start(json, Some(all), what))
                .inc(1);
            if done >= all {
                *b = None;
            }
        }
    })
}
