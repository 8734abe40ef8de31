//! Vectors quantised to one byte a number, for a first pass over every vector of a scope in
//! memory: each vector is kept as `i8` codes with its own scale (its largest magnitude over
//! 127) and its exact norm; a query is quantised the same way, and a vector's cosine to it is
//! approximated by the integer dot product of the codes times both scales over both norms. The
//! search rescores its candidates with the exact vectors (docs/design.md 12.8): this pass only
//! chooses them. Pure: the cache holding a [`Matrix`] per (scope, model) is
//! [`crate::storage::vector_cache`].
//!
//! A matrix is a list of immutable segments sorted by id, shared by reference: a query that
//! finds new vectors appended since the matrix was built makes a new matrix of the old segments
//! and one more, merging the newest segments when the one before is at most four times larger
//! (so each vector is copied a logarithmic number of times, as in a log-structured merge).

use std::sync::Arc;

use crate::domain::vector::norm;

/// How many times larger than the segment after it a segment stays unmerged ([`Matrix::append`]).
const MERGE_RATIO: usize = 4;

/// A vector quantised: its codes, its scale and its exact norm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantised<'a> {
    /// One `i8` per number: the number over the scale, rounded.
    pub codes: &'a [i8],
    /// The vector's largest magnitude over 127 (0 for a zero vector).
    pub scale: f32,
    /// The exact Euclidean norm of the vector.
    pub norm: f32,
}

/// Quantises `v` into `codes` (cleared first): returns its scale and exact norm.
pub fn quantise_into(v: &[f32], codes: &mut Vec<i8>) -> (f32, f32) {
    codes.clear();
    quantise_after(v, codes)
}

/// Quantises `v` onto the end of `codes`: returns its scale and exact norm.
fn quantise_after(v: &[f32], codes: &mut Vec<i8>) -> (f32, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 0.0 };
    codes.extend(v.iter().map(|x| {
        if scale > 0.0 {
            (x / scale).round().clamp(-127.0, 127.0) as i8
        } else {
            0
        }
    }));
    (scale, norm(v) as f32)
}

/// The integer dot product of two code vectors of one length (the shorter's length otherwise):
/// 32 independent `i32` lanes, which the compiler turns into widening SIMD multiply-adds.
pub fn dot_codes(a: &[i8], b: &[i8]) -> i32 {
    const LANES: usize = 32;
    let mut acc = [0i32; LANES];
    let whole = a.chunks_exact(LANES).zip(b.chunks_exact(LANES));
    for (x, y) in whole {
        for ((s, p), q) in acc.iter_mut().zip(x).zip(y) {
            *s += i32::from(*p) * i32::from(*q);
        }
    }
    let done = a.len().min(b.len()) / LANES * LANES;
    let rest: i32 = a
        .get(done..)
        .unwrap_or_default()
        .iter()
        .zip(b.get(done..).unwrap_or_default())
        .map(|(p, q)| i32::from(*p) * i32::from(*q))
        .sum();
    acc.iter().sum::<i32>() + rest
}

/// The approximate cosine of two quantised vectors (0 when either is zero).
pub fn approx_cosine(a: Quantised<'_>, b: Quantised<'_>) -> f64 {
    let n = f64::from(a.norm) * f64::from(b.norm);
    if n == 0.0 {
        return 0.0;
    }
    f64::from(dot_codes(a.codes, b.codes)) * f64::from(a.scale) * f64::from(b.scale) / n
}

/// Quantised vectors of one dimension with ascending ids: one segment of a [`Matrix`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Segment {
    ids: Vec<u64>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    norms: Vec<f32>,
}

impl Segment {
    /// The number of vectors.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// No vector.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Adds vector `id` (above every id already here; the caller reads them in key order) of
    /// the segment's dimension `dim` (its codes are cut or padded to it).
    pub fn push(&mut self, dim: usize, id: u64, v: &[f32]) {
        // Straight onto the codes: a matrix of 10^5 vectors is read in one go.
        let start = self.codes.len();
        let (scale, n) = quantise_after(v, &mut self.codes);
        self.codes.resize(start + dim, 0);
        self.ids.push(id);
        self.scales.push(scale);
        self.norms.push(n);
    }

    /// Bytes held (a matrix's size in its cache).
    pub fn bytes(&self) -> usize {
        self.ids.len() * 8 + self.codes.len() + self.scales.len() * 4 + self.norms.len() * 4
    }

    fn extend(&mut self, other: &Segment) {
        self.ids.extend_from_slice(&other.ids);
        self.codes.extend_from_slice(&other.codes);
        self.scales.extend_from_slice(&other.scales);
        self.norms.extend_from_slice(&other.norms);
    }
}

/// Every vector of a (scope, model) quantised, as segments sorted by id ([`Segment`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    dim: usize,
    segments: Vec<Arc<Segment>>,
}

impl Matrix {
    /// An empty matrix of dimension `dim`.
    pub fn new(dim: usize) -> Matrix {
        Matrix {
            dim,
            segments: Vec::new(),
        }
    }

    /// The bytes one vector of dimension `dim` takes in a matrix: its id, codes, scale, norm.
    pub fn row_bytes(dim: usize) -> usize {
        8 + dim + 4 + 4
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The number of vectors.
    pub fn len(&self) -> usize {
        self.segments.iter().map(|s| s.len()).sum()
    }

    /// The highest id held.
    pub fn last_id(&self) -> Option<u64> {
        self.segments
            .iter()
            .rev()
            .find_map(|s| s.ids.last().copied())
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.segments.iter().map(|s| s.bytes()).sum()
    }

    /// The number of segments.
    #[cfg(test)]
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// This matrix with `seg` (ids above every id here) after it, merging the newest segments
    /// while the one before is at most [`MERGE_RATIO`] times larger. The segments shared with
    /// `self` are not copied unless merged.
    pub fn append(&self, seg: Segment) -> Matrix {
        let mut segments = self.segments.clone();
        if !seg.is_empty() {
            segments.push(Arc::new(seg));
        }
        while let [.., a, b] = segments.as_slice() {
            if a.len() > MERGE_RATIO * b.len() {
                break;
            }
            let mut merged = Segment::clone(a);
            merged.extend(b);
            segments.truncate(segments.len() - 2);
            segments.push(Arc::new(merged));
        }
        Matrix {
            dim: self.dim,
            segments,
        }
    }

    /// The approximate cosine of every vector with id at most `upto` to `q` (of the matrix's
    /// dimension), by id ascending.
    pub fn cosines(&self, q: &[f32], upto: u64) -> Vec<(u64, f64)> {
        let mut qc = Vec::with_capacity(self.dim);
        let (qs, qn) = quantise_into(q, &mut qc);
        qc.resize(self.dim, 0);
        let query = Quantised {
            codes: &qc,
            scale: qs,
            norm: qn,
        };
        let mut out = Vec::with_capacity(self.len());
        for s in &self.segments {
            let rows = s.codes.chunks_exact(self.dim.max(1));
            for (((&id, codes), &scale), &n) in s.ids.iter().zip(rows).zip(&s.scales).zip(&s.norms)
            {
                if id > upto {
                    return out;
                }
                let v = Quantised {
                    codes,
                    scale,
                    norm: n,
                };
                out.push((id, approx_cosine(v, query)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    //! The quantised cosine against the exact one; appends keep ids in order and merge segments.
    use super::*;
    use crate::domain::test_rng::xorshift;

    fn random(r: &mut impl FnMut() -> u64, dim: usize) -> Vec<f32> {
        (0..dim)
            .map(|_| (r() % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }

    fn exact(a: &[f32], b: &[f32]) -> f64 {
        let d: f64 = a
            .iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum();
        d / (norm(a) * norm(b))
    }

    #[test]
    fn the_quantised_cosine_is_within_two_hundredths_of_the_exact_one() {
        let mut r = xorshift(7);
        for dim in [1, 3, 31, 32, 33, 384] {
            let q = random(&mut r, dim);
            let mut seg = Segment::default();
            let vs: Vec<Vec<f32>> = (0..50).map(|_| random(&mut r, dim)).collect();
            for (i, v) in vs.iter().enumerate() {
                seg.push(dim, i as u64, v);
            }
            let m = Matrix::new(dim).append(seg);
            let got = m.cosines(&q, u64::MAX);
            assert_eq!(got.len(), 50);
            for ((id, c), v) in got.iter().zip(&vs) {
                let e = exact(v, &q);
                assert!((c - e).abs() < 0.02, "dim {dim} #{id}: {c} vs {e}");
            }
        }
    }

    #[test]
    fn dot_codes_matches_the_plain_sum_at_every_length() {
        let mut r = xorshift(3);
        for n in 0..100 {
            let a: Vec<i8> = (0..n).map(|_| ((r() % 255) as i16 - 127) as i8).collect();
            let b: Vec<i8> = (0..n).map(|_| ((r() % 255) as i16 - 127) as i8).collect();
            let plain: i32 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            assert_eq!(dot_codes(&a, &b), plain, "length {n}");
        }
    }

    #[test]
    fn appends_keep_every_id_in_order_and_merge_small_segments() {
        let mut m = Matrix::new(2);
        let mut id = 0u64;
        for k in [100usize, 1, 1, 1, 1, 1, 7, 1, 30, 1, 1] {
            let mut seg = Segment::default();
            for _ in 0..k {
                seg.push(2, id, &[1.0, id as f32]);
                id += 1;
            }
            m = m.append(seg);
        }
        let ids: Vec<u64> = m
            .cosines(&[1.0, 0.0], u64::MAX)
            .iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(ids, (0..id).collect::<Vec<_>>());
        assert_eq!(m.len() as u64, id);
        assert_eq!(m.last_id(), Some(id - 1));
        assert_eq!(m.bytes(), m.len() * Matrix::row_bytes(2));
        assert!(m.segment_count() <= 4, "{} segments", m.segment_count());
        // `upto` cuts the ids above it (a reader of an older snapshot).
        assert_eq!(m.cosines(&[1.0, 0.0], 9).len(), 10);
    }

    #[test]
    fn a_zero_vector_has_cosine_zero() {
        let mut seg = Segment::default();
        seg.push(3, 0, &[0.0, 0.0, 0.0]);
        let m = Matrix::new(3).append(seg);
        assert_eq!(m.cosines(&[1.0, 2.0, 3.0], u64::MAX), vec![(0, 0.0)]);
    }
}
