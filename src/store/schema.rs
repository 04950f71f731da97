//! Every redb table of a workspace store and the format version. `docs/format.md` describes
//! each record field by field.

use redb::TableDefinition;

/// Store format version a new store is created with, and keeps until it holds a delta.
pub const FORMAT_VERSION: u32 = 1;
/// Store format version of a store holding delta objects (version-2 object records),
/// recorded in the transaction that writes the first one, so a retrace that reads only
/// format 1 refuses the store instead of misreading it. A store of another version is
/// refused.
pub const FORMAT_DELTAS: u32 = 2;

/// `meta`: small named values. Keys: [`META_FORMAT`], [`META_WORKSPACE`], [`META_STORE_ID`],
/// [`META_LOG_END`], [`META_MAINTAINED`], [`META_OVER_BUDGET`], [`META_LAST_KNOWN`].
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// `objects`: object id → postcard [`crate::object::ObjectRecord`].
pub const OBJECTS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("objects");
/// `packs`: pack number → up to [`PACK_BYTES`] bytes of the append-only pack log.
pub const PACKS: TableDefinition<u64, &[u8]> = TableDefinition::new("packs");
/// `snapshots`: sequence number → postcard [`crate::store::SnapshotRecord`].
pub const SNAPSHOTS: TableDefinition<u64, &[u8]> = TableDefinition::new("snapshots");
/// `sessions`: session key (blake3 of the host's session id) → postcard
/// [`crate::history::record::SessionRecord`].
pub const SESSIONS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("sessions");
/// `turns`: (session key, turn number) → postcard [`crate::history::record::TurnRecord`].
pub const TURNS: TableDefinition<(&[u8; 32], u64), &[u8]> = TableDefinition::new("turns");
/// `checkpoints`: (session key, number) → postcard
/// [`crate::history::record::CheckpointRecord`].
pub const CHECKPOINTS: TableDefinition<(&[u8; 32], u64), &[u8]> =
    TableDefinition::new("checkpoints");
/// `oplog`: (session key, sequence number) → postcard [`crate::history::record::OpRecord`].
pub const OPLOG: TableDefinition<(&[u8; 32], u64), &[u8]> = TableDefinition::new("oplog");

/// `session_names`: (session key, 0) → postcard [`crate::history::record::SessionName`]: the
/// host's name of the session (the number is always 0; the table is keyed as the other
/// per-session tables so that they share their code).
pub const SESSION_NAMES: TableDefinition<(&[u8; 32], u64), &[u8]> =
    TableDefinition::new("session_names");
/// `leases`: (session key, turn number) → postcard [`crate::lease::LeaseRecord`]: the owner of
/// a pending turn.
pub const LEASES: TableDefinition<(&[u8; 32], u64), &[u8]> = TableDefinition::new("leases");
/// `reverts`: (session key, turn number) → postcard
/// [`crate::history::record::RevertRecord`]: the turn is a revert of an earlier turn
/// (`retrace revert`), not an agent's.
pub const REVERTS: TableDefinition<(&[u8; 32], u64), &[u8]> = TableDefinition::new("reverts");
/// `steps`: (session key, turn number × 2²⁰ + step number) → postcard
/// [`crate::history::record::StepRecord`]: one tool call of a turn.
pub const STEPS: TableDefinition<(&[u8; 32], u64), &[u8]> = TableDefinition::new("steps");
/// `ledger`: workspace-relative path bytes → postcard
/// [`crate::history::ledger::LedgerEntry`]: who last wrote the path, and the version they
/// left there.
pub const LEDGER: TableDefinition<&[u8], &[u8]> = TableDefinition::new("ledger");
/// `staged`: row number → the index records of objects a capture appended to the pack log
/// and has not indexed yet, in id order: per object its 32-byte id, the record's length
/// (u16 little endian) and the postcard [`crate::object::ObjectRecord`]. The capture that
/// wrote a row indexes it and deletes it in its final commit; a row that outlives its
/// capture (killed) names only unreferenced objects, and collection deletes it.
pub const STAGED: TableDefinition<u64, &[u8]> = TableDefinition::new("staged");
/// `journal`: at most one entry, key `"restore"` → postcard
/// [`crate::restore::journal::JournalRecord`]: a restore that has begun writing files and
/// not finished.
pub const JOURNAL: TableDefinition<&str, &[u8]> = TableDefinition::new("journal");

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
/// Root tree id of the snapshot the ledger was last brought up to date with, 32 bytes.
pub const META_LEDGER_AT: &str = "ledger_at";
/// Paths writers claimed since the ledger was last brought up to date (an edit tool's files
/// at its step's end), postcard; the next update gives each the version it then finds.
pub const META_LEDGER_CLAIMS: &str = "ledger_claims";
/// Paths an edit step read since the ledger was last brought up to date, postcard: the next
/// update checks that each still holds the version read (another writer may have replaced
/// or deleted it since, between two snapshots that both lack it).
pub const META_LEDGER_OBSERVED: &str = "ledger_observed";
/// Root tree id of the workspace's last known state (last captured or restored), 32 bytes.
pub const META_LAST_KNOWN: &str = "last_known";

/// Bytes per pack value. redb stores a value in a leaf of a power-of-two number of 4 KiB
/// pages; 64 KiB minus room for the leaf header fills such a leaf exactly. Measured: values of
/// 64 KiB − 64 keep the file at 1.05× the payload, while 256 KiB values give 1.45× and
/// exact powers of two 2.7× (docs/benchmarks.md, "redb value sizes").
pub const PACK_BYTES: u64 = 65536 - 128;
