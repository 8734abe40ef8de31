//! Files somna writes next to a user-chosen path do not follow planted links (issue 27, point
//! 3): `session export-dir` into a folder where another user planted `.s1.json.tmp -> victim`
//! (the old temporary name) or `s1.json -> victim` leaves both victims untouched, and still
//! writes `s1.json` with the session.

use crate::common::Env;

#[test]
fn export_dir_never_writes_through_a_planted_link() {
    let e = Env::init();
    let mut c = e.cmd();
    c.args(["session", "save", "s1"]);
    let r = crate::common::run_raw(c, Some(br#"[{"role":"user","content":"hi"}]"#));
    assert_eq!(r.code, 0, "{r:?}");
    let out = e.dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let victim = e.dir.path().join("victim");
    let victim2 = e.dir.path().join("victim2");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::write(&victim2, "precious too").unwrap();
    std::os::unix::fs::symlink(&victim, out.join(".s1.json.tmp")).unwrap();
    std::os::unix::fs::symlink(&victim2, out.join("s1.json")).unwrap();
    e.ok(&["session", "export-dir", out.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(std::fs::read_to_string(&victim2).unwrap(), "precious too");
    let written = out.join("s1.json");
    assert!(!std::fs::symlink_metadata(&written).unwrap().is_symlink());
    assert!(std::fs::read_to_string(&written)
        .unwrap()
        .contains("\"hi\""));
    // No temporary file is left behind (the planted link is the only dot file).
    let dots: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|d| d.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert_eq!(dots, vec![".s1.json.tmp".to_string()]);
}
