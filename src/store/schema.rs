//! The store's own redb tables and meta keys, and the format version. `docs/format.md`
//! describes each record field by field. The tables of the layers above are declared there
//! as [`super::RowsTable`]s and the like (`history/tables.rs`, `restore/journal.rs`).

use redb::TableDefinition;

/// Store format version a new store is created with, and keeps until it holds a delta.
pub const FORMAT_VERSION: u32 = 1;
/// Store format version of a store holding delta objects (version-2 object records),
/// recorded in the transaction that writes the first one, so a retrace that reads only
/// format 1 refuses the store instead of misreading it. A store of another version is
/// refused.
pub const FORMAT_DELTAS: u32 = 2;
/// Store format version of a store holding a parity frame (codec `ZstdParity`), recorded in
/// the transaction that writes the first one; it holds deltas too, as format 2 may.
pub const FORMAT_PARITY: u32 = 3;

/// `meta`: small named values. Keys: [`META_FORMAT`], [`META_WORKSPACE`], [`META_STORE_ID`],
/// [`META_LOG_END`], [`META_MAINTAINED`], [`META_OVER_BUDGET`], [`META_LAST_KNOWN`].
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// `objects`: object id → postcard [`crate::object::ObjectRecord`].
pub const OBJECTS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("objects");
/// `packs`: pack number → up to [`PACK_BYTES`] bytes of the append-only pack log.
pub const PACKS: TableDefinition<u64, &[u8]> = TableDefinition::new("packs");
/// `snapshots`: sequence number → postcard [`crate::store::SnapshotRecord`].
pub const SNAPSHOTS: TableDefinition<u64, &[u8]> = TableDefinition::new("snapshots");
/// `snapshot_added`: a `snapshots` row's key → the stored (compressed) bytes the operation
/// that wrote the row added to the store, `u64` little endian: its new file contents, chunk
/// lists, deltas and trees, over every transaction it wrote. Written in the row's own
/// transaction and deleted with the row; a row without one (written before the table, or by
/// an older retrace) has its figure computed by walking its change.
pub const SNAPSHOT_ADDED: TableDefinition<u64, &[u8]> = TableDefinition::new("snapshot_added");
/// `staged`: row number → the index records of objects a capture appended to the pack log
/// and has not indexed yet, in id order: per object its 32-byte id, the record's length
/// (u16 little endian) and the postcard [`crate::object::ObjectRecord`]. The capture that
/// wrote a row indexes it and deletes it in its final commit; a row that outlives its
/// capture (killed) names only unreferenced objects, and collection deletes it.
pub const STAGED: TableDefinition<u64, &[u8]> = TableDefinition::new("staged");
/// Random 16 bytes chosen when the store is created; the stat cache records it so a cache
/// never vouches for objects of another (or a recreated) store.
pub const META_STORE_ID: &str = "store_id";
/// Format version, u32 little endian.
pub const META_FORMAT: &str = "format";
/// Canonical workspace root path bytes.
pub const META_WORKSPACE: &str = "workspace";
/// Length of the pack log in bytes, u64 little endian.
pub const META_LOG_END: &str = "log_end";
/// Unix milliseconds of the last maintenance pass, u64 little endian.
pub const META_MAINTAINED: &str = "maintained";
/// How many times damaged objects were forgotten, u64 little endian (absent: never). It
/// changes the key a stat cache must name ([`crate::store::StoreReader::cache_key`]), so no
/// cache vouches for a forgotten object.
pub const META_FORGOTTEN: &str = "forgotten";
/// The ids of the objects forgotten as damaged, 32 bytes each, concatenated (absent: none).
/// A capture that meets such an id's content again stores it whole, so that every delta
/// naming it as its base reads again: stored again as a delta, it could sit at a depth no
/// lower than its dependents', which the chain check takes for damage.
pub const META_FORGOTTEN_IDS: &str = "forgotten_ids";
/// Packed bytes the last maintenance pass could not go below without evicting what is
/// never evicted, u64 little endian; absent when it met the byte budget.
pub const META_OVER_BUDGET: &str = "over_budget";
/// Disk bytes of the file right after the last compaction attempt, u64 little endian
/// (absent: never): the file counts as sparse again only once it grew past this.
pub const META_COMPACTED: &str = "compacted";
/// Warnings a background maintenance pass left for the next command to print, UTF-8, one
/// per line; absent when there are none (taken, printed and removed by that command).
pub const META_WARNINGS: &str = "warnings";
/// Root tree id of the workspace's last known state (last captured or restored), 32 bytes.
pub const META_LAST_KNOWN: &str = "last_known";

/// Bytes per pack value. redb stores a value in a leaf of a power-of-two number of 4 KiB
/// pages; 64 KiB minus room for the leaf header fills such a leaf exactly. Measured: values of
/// 64 KiB − 64 keep the file at 1.05× the payload, while 256 KiB values give 1.45× and
/// exact powers of two 2.7× (docs/benchmarks.md, "redb value sizes").
pub const PACK_BYTES: u64 = 65536 - 128;

/// The names of the store's own tables, which no table of a layer above may take.
pub const STORE_TABLES: [&str; 6] = [
    "meta",
    "objects",
    "packs",
    "snapshots",
    "snapshot_added",
    "staged",
];

/// The store's own meta keys, which no [`super::MetaKey`] of a layer above may take.
pub const STORE_META_KEYS: [&str; 11] = [
    META_STORE_ID,
    META_FORMAT,
    META_WORKSPACE,
    META_LOG_END,
    META_MAINTAINED,
    META_FORGOTTEN,
    META_FORGOTTEN_IDS,
    META_OVER_BUDGET,
    META_COMPACTED,
    META_WARNINGS,
    META_LAST_KNOWN,
];
