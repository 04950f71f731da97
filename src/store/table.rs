//! Table handles for the layers above: a table's name and the kind of key it is ordered by,
//! declared as a `const` by the module that owns its records (the history's in
//! `history/tables.rs`, the restore journal's in `restore/journal.rs`). The store knows no
//! table but its own (`schema.rs`); a transaction opens a handle's table with the redb types
//! its kind names (`docs/format.md`, "redb tables"), values always `&[u8]`.
//!
//! A handle or meta key that takes the name of one of the store's own refuses to compile
//! (when declared as a `const`, as they all are).

use redb::TableDefinition;

use super::schema::{STORE_META_KEYS, STORE_TABLES};

/// A 32-byte key (the history's session key, blake3 of the host's session id).
pub type Key = [u8; 32];

/// The key a table is ordered by: with the name, what redb needs to open the table (redb
/// refuses a table opened under other types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// `&[u8; 32]`: one value per 32-byte key ([`KeyedTable`]).
    Key,
    /// `(&[u8; 32], u64)`: numbered rows per 32-byte key ([`RowsTable`]).
    Rows,
    /// `&[u8]`: a byte string ([`BytesTable`]).
    Bytes,
    /// `&str`: a name ([`NamedTable`]).
    Name,
}

/// A table of a layer above the store, whatever its key: what store creation and
/// [`super::StoreReader::table_bytes`] take a list of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    name: &'static str,
    key: KeyKind,
}

impl Table {
    const fn new(name: &'static str, key: KeyKind) -> Table {
        let mut i = 0;
        while i < STORE_TABLES.len() {
            assert!(
                !same(name, STORE_TABLES[i]),
                "the store owns a table of this name"
            );
            i += 1;
        }
        Table { name, key }
    }

    /// The table's name in the file.
    #[must_use]
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// The kind of key it is ordered by.
    #[must_use]
    pub const fn key(self) -> KeyKind {
        self.key
    }
}

/// Whether two names are equal (`==` on `str` is not `const`).
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $kind:ident, $k:ty) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name(Table);

        impl $name {
            /// The table named `name`.
            ///
            /// # Panics
            /// When `name` is one of the store's own tables (at compile time in a `const`).
            #[must_use]
            pub const fn new(name: &'static str) -> $name {
                $name(Table::new(name, KeyKind::$kind))
            }

            /// The table, whatever its key.
            #[must_use]
            pub const fn table(self) -> Table {
                self.0
            }

            pub(super) const fn def(self) -> TableDefinition<'static, $k, &'static [u8]> {
                TableDefinition::new(self.0.name)
            }
        }
    };
}

handle!(
    /// A table of one value per 32-byte key (key type `&[u8; 32]`).
    KeyedTable,
    Key,
    &'static Key
);
handle!(
    /// A table of numbered rows per 32-byte key (key type `(&[u8; 32], u64)`), read and removed
    /// by ranges of numbers.
    RowsTable,
    Rows,
    (&'static Key, u64)
);
handle!(
    /// A table keyed by byte strings (key type `&[u8]`), in byte order.
    BytesTable,
    Bytes,
    &'static [u8]
);
handle!(
    /// A table keyed by names (key type `&str`).
    NamedTable,
    Name,
    &'static str
);

/// A key of the store's `meta` table that a layer above owns (its value is that layer's
/// bytes; the store only keeps them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaKey(&'static str);

impl MetaKey {
    /// The meta key `name`.
    ///
    /// # Panics
    /// When `name` is one of the store's own meta keys (at compile time in a `const`).
    #[must_use]
    pub const fn new(name: &'static str) -> MetaKey {
        let mut i = 0;
        while i < STORE_META_KEYS.len() {
            assert!(
                !same(name, STORE_META_KEYS[i]),
                "the store owns a meta key of this name"
            );
            i += 1;
        }
        MetaKey(name)
    }

    /// The key's name in `meta`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        self.0
    }
}

/// Opens (creating) `table` in `tx`, with the types of its kind.
pub(super) fn create(tx: &redb::WriteTransaction, table: Table) -> Result<(), redb::Error> {
    match table.key {
        KeyKind::Key => drop(tx.open_table(KeyedTable(table).def())?),
        KeyKind::Rows => drop(tx.open_table(RowsTable(table).def())?),
        KeyKind::Bytes => drop(tx.open_table(BytesTable(table).def())?),
        KeyKind::Name => drop(tx.open_table(NamedTable(table).def())?),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_whole() {
        assert!(same("meta", "meta"));
        assert!(!same("meta", "metas"));
        assert!(!same("objects", "object_"));
    }

    #[test]
    #[should_panic(expected = "the store owns a table of this name")]
    fn a_handle_never_takes_a_store_table() {
        let _ = RowsTable::new(STORE_TABLES[0]);
    }

    #[test]
    #[should_panic(expected = "the store owns a meta key of this name")]
    fn a_meta_key_never_takes_a_store_key() {
        let _ = MetaKey::new(STORE_META_KEYS[0]);
    }
}
