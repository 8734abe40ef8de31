//! The wake plot: wake latency against history size, one line per engine and a dashed line for
//! redb's floor; log-scale x, linear y from 0. Hand-written SVG, no plotting dependency.

use std::fmt::Write as _;

use crate::data::WAKE_LINES;
use crate::engines::{redb_floor, FLATFILE, SOMNA, SQLITE};

/// The lines, in the legend's order: (engine, colour, label, dash).
const LINES: [(&str, &str, &str, &str); 4] = [
    (SOMNA, "#d62728", "somna (Store::wake_text)", ""),
    (SQLITE, "#1f77b4", "SQLite (rows by key)", ""),
    (FLATFILE, "#2ca02c", "flat file (by offset)", ""),
    (
        redb_floor::NAME,
        "#888888",
        "redb floor (same cover, by key)",
        r#" stroke-dasharray="6 4""#,
    ),
];

/// The plot's geometry: where sizes and microseconds fall.
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    top: f64,
    pw: f64,
    ph: f64,
    ymax: f64,
    step: f64,
}

impl Frame {
    fn new(max_us: f64) -> Frame {
        let (w, h) = (820.0f64, 440.0f64);
        let (left, right, top, bottom) = (80.0, 250.0, 60.0, 60.0);
        // A round top for the y axis.
        let step = {
            let raw = max_us / 5.0;
            let mag = 10f64.powf(raw.log10().floor());
            [1.0, 2.0, 2.5, 5.0, 10.0]
                .iter()
                .map(|m| m * mag)
                .find(|s| *s >= raw)
                .unwrap_or(10.0 * mag)
        };
        let ymax = (max_us * 1.08 / step).ceil().max(1.0) * step;
        Frame {
            w,
            h,
            left,
            top,
            pw: w - left - right,
            ph: h - top - bottom,
            ymax,
            step,
        }
    }

    fn x(&self, t: u64) -> f64 {
        self.left + ((t as f64).log10() - 3.0) / 3.0 * self.pw
    }

    fn y(&self, us: f64) -> f64 {
        self.top + self.ph - us / self.ymax * self.ph
    }
}

/// Wake latency against history size, from `rows` of (memories, engine, median ns).
pub fn wake_svg(rows: &[(u64, &'static str, f64)], quick: bool) -> String {
    let max_us = rows.iter().map(|r| r.2 / 1e3).fold(0.0f64, f64::max);
    let f = Frame::new(max_us);
    let mut s = String::new();
    let (w, h) = (f.w, f.h);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="{}" y="28" font-size="16" font-weight="bold" text-anchor="middle">Wake ({WAKE_LINES} lines) latency against history size</text>"##,
        f.left + f.pw / 2.0
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="46" fill="#555" text-anchor="middle">median per wake, warm cache, fully summarized histories{}</text>"##,
        f.left + f.pw / 2.0,
        if quick { " (quick run)" } else { "" }
    );
    axes(&mut s, &f);
    for (i, line) in LINES.iter().enumerate() {
        engine_line(&mut s, &f, rows, i, *line);
    }
    s.push_str("</svg>\n");
    s
}

/// The grid, the ticks, the frame and the axis titles.
fn axes(s: &mut String, f: &Frame) {
    let (left, top, pw, ph, step) = (f.left, f.top, f.pw, f.ph, f.step);
    let mut v = 0.0;
    while v <= f.ymax + step / 2.0 {
        let yy = f.y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#e0e0e0"/>"##,
            left + pw
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left - 8.0,
            yy + 4.0,
            if step >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        );
        v += step;
    }
    for (t, label) in [
        (1_000u64, "1,000"),
        (10_000, "10,000"),
        (100_000, "100,000"),
        (1_000_000, "1,000,000"),
    ] {
        let xx = f.x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{:.1}" stroke="#e0e0e0"/>"##,
            top + ph
        );
        let _ = writeln!(
            s,
            r##"<text x="{xx:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            top + ph + 20.0
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">memories in the history (log scale)</text>"##,
        left + pw / 2.0,
        f.h - 18.0
    );
    let _ = writeln!(
        s,
        r##"<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">µs per wake</text>"##,
        top + ph / 2.0,
        top + ph / 2.0
    );
}

/// One engine's line, its points with their values, and its legend entry (the `i`-th).
fn engine_line(
    s: &mut String,
    f: &Frame,
    rows: &[(u64, &'static str, f64)],
    i: usize,
    (engine, color, label, dash): (&str, &str, &str, &str),
) {
    let mut pts: Vec<(u64, f64)> = rows
        .iter()
        .filter(|r| r.1 == engine)
        .map(|r| (r.0, r.2 / 1e3))
        .collect();
    pts.sort_by_key(|p| p.0);
    if pts.is_empty() {
        return;
    }
    let path: Vec<String> = pts
        .iter()
        .map(|(t, us)| format!("{:.1},{:.1}", f.x(*t), f.y(*us)))
        .collect();
    let _ = writeln!(
        s,
        r##"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2.5"{dash}/>"##,
        path.join(" ")
    );
    for (t, us) in &pts {
        let _ = writeln!(
            s,
            r##"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{color}"/>"##,
            f.x(*t),
            f.y(*us)
        );
        if engine == redb_floor::NAME {
            continue;
        }
        // The lowest engine at this size is labelled below its point, the others above.
        let lowest = rows
            .iter()
            .filter(|r| r.0 == *t && r.1 != redb_floor::NAME)
            .all(|r| r.2 / 1e3 >= *us);
        let dy = if lowest { 18.0 } else { -9.0 };
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="{color}" font-size="11" text-anchor="middle">{:.0}</text>"##,
            f.x(*t),
            f.y(*us) + dy,
            us
        );
    }
    let ly = f.top + 20.0 + i as f64 * 22.0;
    let lx = f.left + f.pw + 16.0;
    let _ = writeln!(
        s,
        r##"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2.5"{dash}/>"##,
        lx + 22.0
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" font-size="11">{label}</text>"##,
        lx + 28.0,
        ly + 4.0
    );
}
