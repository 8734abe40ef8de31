//! A store handle's cache of quantised vectors ([`crate::domain::quantised::Matrix`]), one per
//! (scope, vector space), so that a vector or hybrid search does not read every vector of the
//! scope from the file on each query (docs/design.md 12.8). An entry remembers the store's
//! count of vector rewrites (`meta["vector_rewrites"]`, [`crate::storage::embeddings::rewrites`])
//! when it was built: a query uses it only while the count in its own snapshot is the same,
//! and appends the vectors added above the entry's highest id (a write that puts a vector at or
//! below a scope's highest id, or deletes one, raises the count). Shared by the clones of a
//! [`crate::Store`]; nothing here reads or writes the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::domain::quantised::Matrix;

/// The bytes of quantised vectors a handle keeps at most (a 384-dimension vector takes 400):
/// about 650,000 such vectors. A (scope, space) larger than this is searched from the file.
pub const MAX_BYTES: usize = 256 << 20;

/// Which vectors: a scope id, and the embedder's model (`None`: the callers' vectors).
pub type SpaceKey = (u32, Option<String>);

/// One cached matrix and the store's rewrite count it was read at.
#[derive(Debug, Clone)]
pub struct Cached {
    /// `meta["vector_rewrites"]` in the snapshot the matrix was read from.
    pub rewrites: u64,
    /// The quantised vectors.
    pub matrix: Arc<Matrix>,
}

/// The cache: shared by every clone of a store handle.
#[derive(Debug, Default)]
pub struct VectorCache {
    entries: Mutex<HashMap<SpaceKey, Cached>>,
}

impl VectorCache {
    /// The map, locked. A poisoned lock only means another thread panicked holding it; every
    /// entry in the map is whole (entries are replaced, never changed in place).
    fn lock(&self) -> MutexGuard<'_, HashMap<SpaceKey, Cached>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry of `key`, if any.
    pub fn get(&self, key: &SpaceKey) -> Option<Cached> {
        self.lock().get(key).cloned()
    }

    /// Keeps `c` for `key` unless the entry there is newer (a higher rewrite count, or the same
    /// and more vectors: another reader's later snapshot) or `c` alone exceeds [`MAX_BYTES`];
    /// other entries are dropped, oldest first, while the total would exceed it.
    pub fn put(&self, key: SpaceKey, c: Cached) {
        let bytes = c.matrix.bytes();
        if bytes > MAX_BYTES {
            return;
        }
        let mut map = self.lock();
        if let Some(old) = map.get(&key) {
            let newer = (old.rewrites, old.matrix.last_id()) > (c.rewrites, c.matrix.last_id());
            if newer {
                return;
            }
        }
        map.remove(&key);
        while map.values().map(|e| e.matrix.bytes()).sum::<usize>() + bytes > MAX_BYTES {
            let Some(k) = map.keys().next().cloned() else {
                break;
            };
            map.remove(&k);
        }
        map.insert(key, c);
    }
}

#[cfg(test)]
mod tests {
    //! An older snapshot's matrix never replaces a newer one.
    use super::*;
    use crate::domain::quantised::Segment;

    fn matrix(n: u64) -> Arc<Matrix> {
        let mut s = Segment::default();
        for id in 0..n {
            s.push(2, id, &[1.0, 2.0]);
        }
        Arc::new(Matrix::new(2).append(s))
    }

    #[test]
    fn an_older_snapshot_does_not_replace_a_newer_entry() {
        let c = VectorCache::default();
        let key = (1, None);
        c.put(
            key.clone(),
            Cached {
                rewrites: 2,
                matrix: matrix(5),
            },
        );
        c.put(
            key.clone(),
            Cached {
                rewrites: 2,
                matrix: matrix(3),
            },
        );
        assert_eq!(c.get(&key).map(|e| e.matrix.len()), Some(5));
        c.put(
            key.clone(),
            Cached {
                rewrites: 1,
                matrix: matrix(9),
            },
        );
        assert_eq!(c.get(&key).map(|e| e.matrix.len()), Some(5));
        c.put(
            key.clone(),
            Cached {
                rewrites: 3,
                matrix: matrix(1),
            },
        );
        assert_eq!(
            c.get(&key).map(|e| (e.rewrites, e.matrix.len())),
            Some((3, 1))
        );
    }
}
