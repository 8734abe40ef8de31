use crate::sync::{Mutex, RwLock};
use crate::tree_store::btree::{PagePath, UntypedBtree, UntypedBtreeMut};
use crate::tree_store::multimap_btree::{UntypedMultiBtree, relocate_subtrees};
use crate::tree_store::{
    BtreeHeader, PageAllocator, PageHint, PageNumber, PageNumberHashMap, PageResolver,
};
use crate::{Key, Result, TableError, TypeName, Value};
use alloc::string::ToString;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::TypeId;
use core::mem::size_of;

/// somna patch: `T::type_name()`, built once per type and kept, lent to `f`. Opening a table
/// compares the stored key and value type names with the expected ones, and building those
/// allocates (a tuple's name a string per element, about 2,000 instructions an open); a name is
/// a function of the type alone, so it is kept, keyed by the type's `TypeId`.
fn with_type_name<T: Value + 'static, R>(f: impl FnOnce(&TypeName) -> R) -> R {
    // Read-locked on every open after a type's first, so concurrent opens do not serialize;
    // the list holds one entry per key or value type a program opens tables with.
    static NAMES: RwLock<Vec<(TypeId, TypeName)>> = RwLock::new(Vec::new());
    let id = TypeId::of::<T>();
    {
        let names = NAMES.read().unwrap_or_else(|e| e.into_inner());
        if let Some((_, name)) = names.iter().find(|(k, _)| *k == id) {
            return f(name);
        }
    }
    let name = T::type_name();
    let result = f(&name);
    let mut names = NAMES.write().unwrap_or_else(|e| e.into_inner());
    if !names.iter().any(|(k, _)| *k == id) {
        names.push((id, name));
    }
    result
}

// Forward compatibility feature in case alignment can be supported in the future
// See https://github.com/cberner/redb/issues/360
const ALIGNMENT: usize = 1;

#[derive(Copy, Clone, Hash, Eq, PartialEq, Debug)]
pub(crate) enum TableType {
    Normal,
    Multimap,
}

impl TableType {
    fn is_legacy(value: u8) -> bool {
        value == 1 || value == 2
    }
}

#[allow(clippy::from_over_into)]
impl Into<u8> for TableType {
    fn into(self) -> u8 {
        match self {
            // 1 & 2 were used in the v1 file format
            // TableType::Normal => 1,
            // TableType::Multimap => 2,
            TableType::Normal => 3,
            TableType::Multimap => 4,
        }
    }
}

impl From<u8> for TableType {
    fn from(value: u8) -> Self {
        match value {
            3 => TableType::Normal,
            4 => TableType::Multimap,
            _ => unreachable!(),
        }
    }
}

#[derive(Clone, PartialEq, Debug)]
pub(crate) enum InternalTableDefinition {
    Normal {
        table_root: Option<BtreeHeader>,
        table_length: u64,
        fixed_key_size: Option<usize>,
        fixed_value_size: Option<usize>,
        key_alignment: usize,
        value_alignment: usize,
        key_type: TypeName,
        value_type: TypeName,
    },
    Multimap {
        table_root: Option<BtreeHeader>,
        table_length: u64,
        fixed_key_size: Option<usize>,
        fixed_value_size: Option<usize>,
        key_alignment: usize,
        value_alignment: usize,
        key_type: TypeName,
        value_type: TypeName,
    },
}

impl InternalTableDefinition {
    pub(super) fn new<K: Key, V: Value>(
        table_type: TableType,
        table_root: Option<BtreeHeader>,
        table_length: u64,
    ) -> Self {
        match table_type {
            TableType::Normal => InternalTableDefinition::Normal {
                table_root,
                table_length,
                fixed_key_size: K::fixed_width(),
                fixed_value_size: V::fixed_width(),
                key_alignment: ALIGNMENT,
                value_alignment: ALIGNMENT,
                key_type: K::type_name(),
                value_type: V::type_name(),
            },
            TableType::Multimap => InternalTableDefinition::Multimap {
                table_root,
                table_length,
                fixed_key_size: K::fixed_width(),
                fixed_value_size: V::fixed_width(),
                key_alignment: ALIGNMENT,
                value_alignment: ALIGNMENT,
                key_type: K::type_name(),
                value_type: V::type_name(),
            },
        }
    }

    pub(super) fn set_header(&mut self, root: Option<BtreeHeader>, length: u64) {
        match self {
            InternalTableDefinition::Normal {
                table_root,
                table_length,
                ..
            }
            | InternalTableDefinition::Multimap {
                table_root,
                table_length,
                ..
            } => {
                *table_root = root;
                *table_length = length;
            }
        }
    }

    pub(super) fn check_match_untyped(
        &self,
        table_type: TableType,
        name: &str,
    ) -> Result<(), TableError> {
        if self.get_type() != table_type {
            return if self.get_type() == TableType::Multimap {
                Err(TableError::TableIsMultimap(name.to_string()))
            } else {
                Err(TableError::TableIsNotMultimap(name.to_string()))
            };
        }
        if self.private_get_key_alignment() != ALIGNMENT {
            return Err(TableError::type_definition_changed(
                self.private_key_type(),
                self.private_get_key_alignment(),
                self.private_get_fixed_key_size(),
            ));
        }
        if self.private_get_value_alignment() != ALIGNMENT {
            return Err(TableError::type_definition_changed(
                self.private_value_type(),
                self.private_get_value_alignment(),
                self.private_get_fixed_value_size(),
            ));
        }

        Ok(())
    }

    pub(super) fn check_match<K: Key + 'static, V: Value + 'static>(
        &self,
        table_type: TableType,
        name: &str,
    ) -> Result<(), TableError> {
        self.check_match_untyped(table_type, name)?;

        // somna: borrowed, not cloned (two allocations each time a table is opened); cloned for
        // the error only
        let (stored_key, stored_value) = self.type_names();
        // Accept the current type name, or the spelling an older redb version may have stored for
        // the same type (see `TypeName::matches_legacy`).
        let key_matches = with_type_name::<K, _>(|expected| {
            stored_key == expected || expected.matches_legacy(stored_key)
        });
        let value_matches = with_type_name::<V, _>(|expected| {
            stored_value == expected || expected.matches_legacy(stored_value)
        });
        if !key_matches || !value_matches {
            return Err(TableError::type_mismatch(
                name,
                stored_key.clone(),
                stored_value.clone(),
                K::type_name(),
                V::type_name(),
            ));
        }
        if self.private_get_fixed_key_size() != K::fixed_width() {
            return Err(TableError::type_definition_changed(
                K::type_name(),
                self.private_get_key_alignment(),
                self.private_get_fixed_key_size(),
            ));
        }
        if self.private_get_fixed_value_size() != V::fixed_width() {
            return Err(TableError::type_definition_changed(
                V::type_name(),
                self.private_get_value_alignment(),
                self.private_get_fixed_value_size(),
            ));
        }

        Ok(())
    }

    pub(crate) fn visit_all_pages<'a, F>(
        &self,
        mem: PageResolver,
        hint: PageHint,
        visitor: F,
    ) -> Result
    where
        F: FnMut(&PagePath) -> Result + 'a,
    {
        match self {
            InternalTableDefinition::Normal {
                table_root,
                fixed_key_size,
                fixed_value_size,
                ..
            } => {
                let tree =
                    UntypedBtree::new(*table_root, mem, hint, *fixed_key_size, *fixed_value_size);
                tree.visit_all_pages(visitor)?;
            }
            InternalTableDefinition::Multimap {
                table_root,
                fixed_key_size,
                fixed_value_size,
                ..
            } => {
                let tree = UntypedMultiBtree::new(
                    *table_root,
                    mem,
                    hint,
                    *fixed_key_size,
                    *fixed_value_size,
                );
                tree.visit_all_pages(visitor)?;
            }
        }

        Ok(())
    }

    pub(crate) fn relocate_tree(
        &mut self,
        page_allocator: PageAllocator,
        freed_pages: Arc<Mutex<Vec<PageNumber>>>,
        relocation_map: &PageNumberHashMap<PageNumber>,
    ) -> Result<Option<BtreeHeader>> {
        let original_root = self.private_get_root();
        let relocated_root = match self {
            InternalTableDefinition::Normal { table_root, .. } => *table_root,
            InternalTableDefinition::Multimap {
                table_root,
                fixed_key_size,
                fixed_value_size,
                ..
            } => {
                if let Some(header) = table_root {
                    let (page_number, checksum) = relocate_subtrees(
                        (header.root, header.checksum),
                        *fixed_key_size,
                        *fixed_value_size,
                        page_allocator.clone(),
                        freed_pages.clone(),
                        relocation_map,
                    )?;
                    Some(BtreeHeader::new(page_number, checksum, header.length))
                } else {
                    None
                }
            }
        };
        let mut tree = UntypedBtreeMut::new(
            relocated_root,
            page_allocator,
            freed_pages,
            self.private_get_fixed_key_size(),
            self.private_get_fixed_value_size(),
        );
        tree.relocate(relocation_map)?;
        if tree.get_root() != original_root {
            self.set_header(tree.get_root(), self.get_length());
            Ok(tree.get_root())
        } else {
            Ok(None)
        }
    }

    fn private_get_root(&self) -> Option<BtreeHeader> {
        match self {
            InternalTableDefinition::Normal { table_root, .. }
            | InternalTableDefinition::Multimap { table_root, .. } => *table_root,
        }
    }

    pub(crate) fn get_length(&self) -> u64 {
        match self {
            InternalTableDefinition::Normal { table_length, .. }
            | InternalTableDefinition::Multimap { table_length, .. } => *table_length,
        }
    }

    fn private_get_fixed_key_size(&self) -> Option<usize> {
        match self {
            InternalTableDefinition::Normal { fixed_key_size, .. }
            | InternalTableDefinition::Multimap { fixed_key_size, .. } => *fixed_key_size,
        }
    }

    fn private_get_fixed_value_size(&self) -> Option<usize> {
        match self {
            InternalTableDefinition::Normal {
                fixed_value_size, ..
            }
            | InternalTableDefinition::Multimap {
                fixed_value_size, ..
            } => *fixed_value_size,
        }
    }

    fn private_get_key_alignment(&self) -> usize {
        match self {
            InternalTableDefinition::Normal { key_alignment, .. }
            | InternalTableDefinition::Multimap { key_alignment, .. } => *key_alignment,
        }
    }

    fn private_get_value_alignment(&self) -> usize {
        match self {
            InternalTableDefinition::Normal {
                value_alignment, ..
            }
            | InternalTableDefinition::Multimap {
                value_alignment, ..
            } => *value_alignment,
        }
    }

    pub(crate) fn get_type(&self) -> TableType {
        match self {
            InternalTableDefinition::Normal { .. } => TableType::Normal,
            InternalTableDefinition::Multimap { .. } => TableType::Multimap,
        }
    }

    // somna: cloned from `type_names()`, which holds the match over the variants
    fn private_key_type(&self) -> TypeName {
        self.type_names().0.clone()
    }

    fn private_value_type(&self) -> TypeName {
        self.type_names().1.clone()
    }

    // somna: the key's and the value's type names, borrowed (`as_bytes` writes them in place,
    // `check_match` compares them)
    fn type_names(&self) -> (&TypeName, &TypeName) {
        match self {
            InternalTableDefinition::Normal {
                key_type,
                value_type,
                ..
            }
            | InternalTableDefinition::Multimap {
                key_type,
                value_type,
                ..
            } => (key_type, value_type),
        }
    }
}

impl Value for InternalTableDefinition {
    type SelfType<'a> = InternalTableDefinition;
    type AsBytes<'a> = Vec<u8>;

    fn fixed_width() -> Option<usize> {
        None
    }

    fn from_bytes<'a>(data: &'a [u8]) -> Self
    where
        Self: 'a,
    {
        debug_assert!(data.len() > 22);
        let mut offset = 0;
        let legacy = TableType::is_legacy(data[offset]);
        assert!(!legacy);
        let table_type = TableType::from(data[offset]);
        offset += 1;

        let table_length = u64::from_le_bytes(
            data[offset..(offset + size_of::<u64>())]
                .try_into()
                .unwrap(),
        );
        offset += size_of::<u64>();

        let non_null = data[offset] != 0;
        offset += 1;
        let table_root = if non_null {
            Some(BtreeHeader::from_le_bytes(
                data[offset..(offset + BtreeHeader::serialized_size())]
                    .try_into()
                    .unwrap(),
            ))
        } else {
            None
        };
        offset += BtreeHeader::serialized_size();

        let non_null = data[offset] != 0;
        offset += 1;
        let fixed_key_size = if non_null {
            let fixed = u32::from_le_bytes(
                data[offset..(offset + size_of::<u32>())]
                    .try_into()
                    .unwrap(),
            ) as usize;
            Some(fixed)
        } else {
            None
        };
        offset += size_of::<u32>();

        let non_null = data[offset] != 0;
        offset += 1;
        let fixed_value_size = if non_null {
            let fixed = u32::from_le_bytes(
                data[offset..(offset + size_of::<u32>())]
                    .try_into()
                    .unwrap(),
            ) as usize;
            Some(fixed)
        } else {
            None
        };
        offset += size_of::<u32>();
        let key_alignment = u32::from_le_bytes(
            data[offset..(offset + size_of::<u32>())]
                .try_into()
                .unwrap(),
        ) as usize;
        offset += size_of::<u32>();
        let value_alignment = u32::from_le_bytes(
            data[offset..(offset + size_of::<u32>())]
                .try_into()
                .unwrap(),
        ) as usize;
        offset += size_of::<u32>();

        let key_type_len = u32::from_le_bytes(
            data[offset..(offset + size_of::<u32>())]
                .try_into()
                .unwrap(),
        ) as usize;
        offset += size_of::<u32>();
        let key_type = TypeName::from_bytes(&data[offset..(offset + key_type_len)]);
        offset += key_type_len;
        let value_type = TypeName::from_bytes(&data[offset..]);

        match table_type {
            TableType::Normal => InternalTableDefinition::Normal {
                table_root,
                table_length,
                fixed_key_size,
                fixed_value_size,
                key_alignment,
                value_alignment,
                key_type,
                value_type,
            },
            TableType::Multimap => InternalTableDefinition::Multimap {
                table_root,
                table_length,
                fixed_key_size,
                fixed_value_size,
                key_alignment,
                value_alignment,
                key_type,
                value_type,
            },
        }
    }

    // Be careful if you change this serialization format! The InternalTableDefinition for
    // a given table needs to have a consistent serialized length, regardless of the table
    // contents, so that create_table_and_flush_table_root() can update the allocator state
    // table without causing more allocations
    fn as_bytes<'a, 'b: 'a>(value: &'a Self::SelfType<'b>) -> Vec<u8>
    where
        Self: 'b,
    {
        // somna: one vector of the exact size, the type names written into it in place (a
        // commit writes a definition per table it changed: the vector grown three times, two
        // type names cloned and two more vectors made and dropped were most of a definition's
        // cost, about 2,500 instructions of it; the bytes are the same)
        let (key_type, value_type) = value.type_names();
        let mut result = Vec::with_capacity(
            1 + size_of::<u64>()
                + 1
                + BtreeHeader::serialized_size()
                + 2 * (1 + size_of::<u32>())
                + 3 * size_of::<u32>()
                + key_type.bytes_len()
                + value_type.bytes_len(),
        );
        result.push(value.get_type().into());
        result.extend_from_slice(&value.get_length().to_le_bytes());
        if let Some(header) = value.private_get_root() {
            result.push(1);
            result.extend_from_slice(&header.to_le_bytes());
        } else {
            result.push(0);
            result.extend_from_slice(&[0; BtreeHeader::serialized_size()]);
        }
        if let Some(fixed) = value.private_get_fixed_key_size() {
            result.push(1);
            result.extend_from_slice(&u32::try_from(fixed).unwrap().to_le_bytes());
        } else {
            result.push(0);
            result.extend_from_slice(&[0; size_of::<u32>()]);
        }
        if let Some(fixed) = value.private_get_fixed_value_size() {
            result.push(1);
            result.extend_from_slice(&u32::try_from(fixed).unwrap().to_le_bytes());
        } else {
            result.push(0);
            result.extend_from_slice(&[0; size_of::<u32>()]);
        }
        result.extend_from_slice(
            &u32::try_from(value.private_get_key_alignment())
                .unwrap()
                .to_le_bytes(),
        );
        result.extend_from_slice(
            &u32::try_from(value.private_get_value_alignment())
                .unwrap()
                .to_le_bytes(),
        );
        result.extend_from_slice(&u32::try_from(key_type.bytes_len()).unwrap().to_le_bytes());
        key_type.write_bytes(&mut result);
        value_type.write_bytes(&mut result);

        result
    }

    fn type_name() -> TypeName {
        TypeName::internal("redb::InternalTableDefinition")
    }
}

// somna: a table definition's bytes, written in place, are upstream's
#[cfg(test)]
mod somna_definition_bytes_test {
    use super::{InternalTableDefinition, TableType};
    use crate::tree_store::{BtreeHeader, PageNumber};
    use crate::{Key, Value};
    use alloc::vec::Vec;
    use core::mem::size_of;

    // Upstream redb 4.6.0's `InternalTableDefinition::as_bytes`, unchanged but for the
    // accessors it reaches through
    fn upstream_bytes(value: &InternalTableDefinition) -> Vec<u8> {
        let mut result = alloc::vec![value.get_type().into()];
        result.extend_from_slice(&value.get_length().to_le_bytes());
        if let Some(header) = value.private_get_root() {
            result.push(1);
            result.extend_from_slice(&header.to_le_bytes());
        } else {
            result.push(0);
            result.extend_from_slice(&[0; BtreeHeader::serialized_size()]);
        }
        if let Some(fixed) = value.private_get_fixed_key_size() {
            result.push(1);
            result.extend_from_slice(&u32::try_from(fixed).unwrap().to_le_bytes());
        } else {
            result.push(0);
            result.extend_from_slice(&[0; size_of::<u32>()]);
        }
        if let Some(fixed) = value.private_get_fixed_value_size() {
            result.push(1);
            result.extend_from_slice(&u32::try_from(fixed).unwrap().to_le_bytes());
        } else {
            result.push(0);
            result.extend_from_slice(&[0; size_of::<u32>()]);
        }
        result.extend_from_slice(
            &u32::try_from(value.private_get_key_alignment())
                .unwrap()
                .to_le_bytes(),
        );
        result.extend_from_slice(
            &u32::try_from(value.private_get_value_alignment())
                .unwrap()
                .to_le_bytes(),
        );
        let key_type_bytes = value.private_key_type().to_bytes();
        result.extend_from_slice(&u32::try_from(key_type_bytes.len()).unwrap().to_le_bytes());
        result.extend_from_slice(&key_type_bytes);
        result.extend_from_slice(&value.private_value_type().to_bytes());
        result
    }

    fn definitions<K: Key + 'static, V: Value + 'static>() -> Vec<InternalTableDefinition> {
        let roots = [
            None,
            Some(BtreeHeader::new(PageNumber::new(0, 7, 0), 0, 0)),
            Some(BtreeHeader::new(
                PageNumber::new(3, 12_345, 2),
                u128::MAX - 12_345,
                u64::MAX,
            )),
        ];
        let mut all = Vec::new();
        for table_type in [TableType::Normal, TableType::Multimap] {
            for root in roots {
                for length in [0, 1, 1 << 40] {
                    all.push(InternalTableDefinition::new::<K, V>(
                        table_type, root, length,
                    ));
                }
            }
        }
        all
    }

    #[test]
    fn a_definition_is_written_as_upstream_wrote_it() {
        let mut all = Vec::new();
        all.extend(definitions::<u64, &[u8]>());
        all.extend(definitions::<&str, u64>());
        all.extend(definitions::<(u32, u64), ()>());
        all.extend(definitions::<(u32, &str, u64), &[u8]>());
        all.extend(definitions::<[u8; 16], Option<u32>>());
        assert_eq!(all.len(), 5 * 2 * 3 * 3);
        for definition in &all {
            let bytes = InternalTableDefinition::as_bytes(definition);
            assert_eq!(bytes, upstream_bytes(definition), "{definition:?}");
            // Written into a vector of the exact size
            assert_eq!(bytes.len(), bytes.capacity(), "{definition:?}");
            assert_eq!(&InternalTableDefinition::from_bytes(&bytes), definition);
        }
    }
}
