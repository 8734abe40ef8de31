//! `session list|load|save|append|items|pop|clear|delete|history|prune|info|import-dir|
//! export-dir`: conversation histories, as JSON arrays of message objects on stdin and stdout.

use std::io::Write;
use std::path::{Path, PathBuf};

use somna::text;
use somna::Error;

use crate::cli::context::Context;
use crate::cli::input::{parse_array, read_input, safe_file_id};
use crate::cli::output::{json, json_array};
use crate::cli::progress::Progress;
use crate::cli::verb::Verb;

pub use super::session_args::{
    AppendArgs, ExportDirArgs, IdArgs, ImportDirArgs, ItemsArgs, ListArgs, SaveArgs, SessionArgs,
    SessionCmd,
};
pub use super::session_results::{appended_text, saved_text, History, Messages, SessionList};

/// Runs one session verb; returns the exit code.
pub fn run(cx: &mut Context<'_>, a: &SessionArgs) -> Result<u8, Error> {
    match &a.cmd {
        SessionCmd::List(a) => list(cx, a),
        SessionCmd::Load(a) => load(cx, a),
        SessionCmd::Save(a) => save(cx, a),
        SessionCmd::Append(a) => append(cx, a),
        SessionCmd::Items(a) => items(cx, a),
        SessionCmd::Pop(a) => pop(cx, a),
        SessionCmd::Clear(a) => clear(cx, a),
        SessionCmd::Delete(a) => delete(cx, a),
        SessionCmd::History(a) => history(cx, a),
        SessionCmd::Prune(a) => prune(cx, a),
        SessionCmd::Info(a) => info(cx, a),
        SessionCmd::ImportDir(a) => import_dir(cx, a),
        SessionCmd::ExportDir(a) => export_dir(cx, a),
    }
}

/// Whether the session verb only reads (see [`super::reads_only`]).
pub fn reads_only(a: &SessionArgs) -> bool {
    matches!(
        a.cmd,
        SessionCmd::List(_)
            | SessionCmd::Load(_)
            | SessionCmd::Items(_)
            | SessionCmd::History(_)
            | SessionCmd::Info(_)
            | SessionCmd::ExportDir(_)
    )
}

/// Lists session ids, sorted (with `--json`, their metadata).
fn list(cx: &mut Context<'_>, a: &ListArgs) -> Result<u8, Error> {
    let l = SessionList::call(&cx.store, a)?;
    cx.show(&l, |l| l.render())
}

/// Prints the session's messages (exit 1 if it does not exist).
fn load(cx: &mut Context<'_>, a: &IdArgs) -> Result<u8, Error> {
    match Messages::load(&cx.store, &a.id)? {
        Some(m) => print_messages(cx, &a.id, &m),
        None if cx.both => {
            writeln!(cx.out, "no session {:?}", text::display_safe(&a.id))?;
            Ok(1)
        }
        None => no_session(&a.id),
    }
}

/// Prints the messages as a JSON array (their text is their JSON, `--json` or not), keeps them
/// as the tool's result, and names the damaged ones on stderr (exit 5).
fn print_messages(cx: &mut Context<'_>, id: &str, m: &Messages) -> Result<u8, Error> {
    cx.capture(m);
    writeln!(cx.out, "{}", m.render())?;
    match m.damage_note(id) {
        Some(note) => {
            eprintln!("somna: {}", text::display_safe(&note));
            Ok(5)
        }
        None => Ok(0),
    }
}

/// Says on stderr that the session does not exist; exit 1.
fn no_session(id: &str) -> Result<u8, Error> {
    eprintln!("somna: no session {:?}", text::display_safe(id));
    Ok(1)
}

/// The messages a verb takes: the JSON array on stdin, each element's text exactly; in a tool
/// call, those of its arguments (`given`).
fn messages(cx: &Context<'_>, given: &[serde_json::Value]) -> Result<Vec<String>, Error> {
    if cx.tool_call {
        return Ok(given.iter().map(serde_json::Value::to_string).collect());
    }
    let items = parse_array(&cx.read_input("-")?, "stdin")?;
    Ok(items.iter().map(|r| r.get().to_string()).collect())
}

/// Replaces the session's messages with the JSON array on stdin (a tool call's `messages`).
fn save(cx: &mut Context<'_>, a: &SaveArgs) -> Result<u8, Error> {
    let items = messages(cx, &a.messages)?;
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let o = cx.store.session_save(&a.id, &refs, a.expect_revision)?;
    cx.show(&o, saved_text)
}

/// Appends the JSON array of items on stdin (a tool call's `items`), as one atomic batch.
fn append(cx: &mut Context<'_>, a: &AppendArgs) -> Result<u8, Error> {
    let items = messages(cx, &a.items)?;
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let o = cx
        .store
        .session_append(&a.id, &refs, a.key.as_deref(), a.expect_revision)?;
    cx.show(&o, appended_text)
}

/// Prints the latest items, oldest first.
fn items(cx: &mut Context<'_>, a: &ItemsArgs) -> Result<u8, Error> {
    let m = Messages::items(&cx.store, a)?;
    print_messages(cx, &a.id, &m)
}

/// Removes and prints the newest item (exit 1 if there is none).
fn pop(cx: &mut Context<'_>, a: &IdArgs) -> Result<u8, Error> {
    match cx.store.session_pop(&a.id, None)? {
        Some(m) => writeln!(cx.out, "{m}")?,
        None => {
            eprintln!(
                "somna: session {:?} has no item to pop",
                text::display_safe(&a.id)
            );
            return Ok(1);
        }
    }
    Ok(0)
}

/// Removes every item; the archive stays.
fn clear(cx: &mut Context<'_>, a: &IdArgs) -> Result<u8, Error> {
    let n = cx.store.session_clear(&a.id)?;
    said(cx, format_args!("Cleared {n} items."))
}

/// Deletes the session, its archive included.
fn delete(cx: &mut Context<'_>, a: &IdArgs) -> Result<u8, Error> {
    let line = match cx.store.session_delete(&a.id)? {
        true => "Deleted session.",
        false => "No such session; nothing to delete.",
    };
    said(cx, format_args!("{line}"))
}

/// Prints the archive (the messages saves have dropped), oldest first, as JSON (`--json` or
/// not).
fn history(cx: &mut Context<'_>, a: &IdArgs) -> Result<u8, Error> {
    let h = History::call(&cx.store, a)?;
    cx.capture(&h);
    writeln!(cx.out, "{}", h.render())?;
    Ok(0)
}

/// Deletes the session's archive.
fn prune(cx: &mut Context<'_>, a: &IdArgs) -> Result<u8, Error> {
    let n = cx.store.session_prune(&a.id)?;
    said(cx, format_args!("Pruned {n} archived messages."))
}

/// Prints `line` and a newline; exit code 0.
fn said(cx: &mut Context<'_>, line: std::fmt::Arguments<'_>) -> Result<u8, Error> {
    writeln!(cx.out, "{line}")?;
    Ok(0)
}

/// Prints the session's metadata as JSON (exit 1 if it does not exist).
fn info(cx: &mut Context<'_>, a: &IdArgs) -> Result<u8, Error> {
    match cx.store.session_info(&a.id)? {
        Some(i) => json(cx.out, &i)?,
        None => return no_session(&a.id),
    }
    Ok(0)
}

/// Imports a directory of `<id>.json` files in one transaction, after checking all of them; a
/// folder inside it names sessions by its path (`team/alice.json` is `team/alice`).
fn import_dir(cx: &mut Context<'_>, a: &ImportDirArgs) -> Result<u8, Error> {
    let dir = &a.dir;
    let mut paths = Vec::new();
    session_files(dir, "", &mut paths)?;
    let reading = Progress::start(cx.json, Some(paths.len() as u64), "reading session files");
    let mut files = Vec::new();
    for (path, id) in &paths {
        files.push(read_session_file(path, id)?);
        reading.inc(1);
    }
    drop(reading);
    files.sort();
    let n = files.len();
    let what = format!("saving {n} sessions (one transaction)");
    let _busy = Progress::start(cx.json, None, &what);
    cx.store.write(|tx| {
        for (id, msgs) in &files {
            let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
            tx.session_save(id, &refs, None)?;
        }
        Ok(())
    })?;
    writeln!(
        cx.out,
        "Imported {n} sessions from {}.",
        crate::cli::output::path_shown(dir)
    )?;
    Ok(0)
}

/// The `.json` files under `dir`, each with the session id its path names (`prefix`, then the
/// folders below `dir` and the name without `.json`, joined by `/`). Links are not followed.
fn session_files(dir: &Path, prefix: &str, out: &mut Vec<(PathBuf, String)>) -> Result<(), Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::Invalid {
        what: "directory",
        reason: format!("cannot read {}: {e}", dir.display()),
    })?;
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            return Err(Error::Invalid {
                what: "session file",
                reason: format!("{}: the name is not UTF-8", path.display()),
            });
        };
        if entry.file_type()?.is_dir() {
            session_files(&path, &format!("{prefix}{name}/"), out)?;
        } else if let Some(stem) = name.strip_suffix(".json") {
            out.push((path, format!("{prefix}{stem}")));
        }
    }
    Ok(())
}

/// A session file, `path`, of session `id`: its id checked and its messages, each compacted.
fn read_session_file(path: &Path, id: &str) -> Result<(String, Vec<String>), Error> {
    let id = id.to_string();
    somna::session::validate_session_id(&id)?;
    let text = read_input(&path.to_string_lossy())?;
    let items = parse_array(&text, &path.display().to_string())?;
    let msgs = items
        .iter()
        .enumerate()
        .map(|(i, r)| {
            somna::session::compact_message(r.get()).map_err(|e| Error::Invalid {
                what: "session file",
                reason: format!("{} message {i}: {e}", path.display()),
            })
        })
        .collect::<Result<Vec<String>, Error>>()?;
    Ok((id, msgs))
}

/// Writes every session as `DIR/<id>.json` (each through a new file of a random name, then
/// renamed: [`write_beside`]); an id with `/` goes in folders (`team/alice` as
/// `DIR/team/alice.json`). A session whose id could not be a path inside `DIR` (one saved
/// before such ids were refused, as `../x`) is skipped, never written outside it: each is named
/// on stderr with the command that reads it, and the exit status is 1.
fn export_dir(cx: &mut Context<'_>, a: &ExportDirArgs) -> Result<u8, Error> {
    let dir = &a.dir;
    let (ids, skipped): (Vec<String>, Vec<String>) = cx
        .store
        .session_ids()?
        .into_iter()
        .partition(|i| safe_file_id(i));
    std::fs::create_dir_all(dir)?;
    let progress = Progress::start(cx.json, Some(ids.len() as u64), "exporting sessions");
    for id in &ids {
        let msgs = cx.store.session_load(id)?.unwrap_or_default();
        let (folder, name) = folder_for(dir, id)?;
        write_beside(
            &folder,
            &format!("{name}.json"),
            json_array(&msgs).as_bytes(),
        )?;
        progress.inc(1);
    }
    drop(progress);
    let shown = crate::cli::output::path_shown(dir);
    for id in &skipped {
        eprintln!(
            "somna: skipped session {:?}: its id cannot be a file name inside {shown} (it could escape it); read it with: {} session load {}",
            text::display_safe(id),
            cx.prefix_without_scope,
            text::display_safe(&crate::cli::output::shell_quote(id)),
        );
    }
    write!(cx.out, "Exported {} sessions to {shown}", ids.len())?;
    if skipped.is_empty() {
        writeln!(cx.out, ".")?;
        return Ok(0);
    }
    writeln!(cx.out, "; skipped {} (named above).", skipped.len())?;
    Ok(1)
}

/// The folder inside `dir` that holds session `id`'s file (its parts before the last `/`, each
/// made with mode 0700 where missing), and the file's name without `.json`. A part that exists
/// as anything but a folder (a link planted there) is refused: nothing is written through it.
fn folder_for<'i>(dir: &Path, id: &'i str) -> Result<(PathBuf, &'i str), Error> {
    let (folders, name) = id.rsplit_once('/').unwrap_or(("", id));
    let mut at = dir.to_path_buf();
    for part in folders.split('/').filter(|p| !p.is_empty()) {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::Invalid {
                    what: "directory",
                    reason: format!(
                        "{} is not a folder (a link or a file is there); nothing was written through it",
                        at.display()
                    ),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => make_folder(&at)?,
            Err(e) => return Err(e.into()),
        }
    }
    Ok((at, name))
}

/// Makes the folder `at` (mode 0700 on Unix).
fn make_folder(at: &Path) -> Result<(), Error> {
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    Ok(b.create(at)?)
}

/// Writes `bytes` as `dir/name`: into a new file of a random name beside it (mode 0600 on Unix,
/// created exclusively, so that a file or symbolic link planted there is never opened), synced,
/// then renamed over `name` (which replaces a link there instead of following it).
fn write_beside(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), Error> {
    let mut r = [0u8; 8];
    getrandom::fill(&mut r)
        .map_err(|e| Error::Io(std::io::Error::other(format!("no randomness: {e}"))))?;
    let r: String = r.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = dir.join(format!(".{name}.{r}.tmp"));
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let mut f = o.open(&tmp)?;
    let done = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, dir.join(name)));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(done?)
}

/// The verb `session` and its subcommands.
pub const SESSION: Verb<SessionArgs> = Verb::reads_when(run, reads_only);
