//! The pack log: object payloads appended end to end into one logical byte stream, cut into
//! fixed-size `packs` values so that redb pads nothing (see [`super::schema::PACK_BYTES`]).

use redb::{ReadableTable, Table};

use super::schema::PACK_BYTES;

/// Appends `payload` at `log_end`, rewriting the partial tail pack. Returns the payload's
/// offset. `tail` caches the partial tail pack across calls in one transaction.
pub(crate) fn append(
    packs: &mut Table<u64, &[u8]>,
    log_end: &mut u64,
    tail: &mut Option<Vec<u8>>,
    payload: &[u8],
) -> Result<u64, redb::Error> {
    let offset = *log_end;
    let mut buf = match tail.take() {
        Some(b) => b,
        None if !offset.is_multiple_of(PACK_BYTES) => packs
            .get(offset / PACK_BYTES)?
            .map(|g| g.value().to_vec())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut pack_no = offset / PACK_BYTES;
    let mut rest = payload;
    loop {
        let room = usize::try_from(PACK_BYTES).unwrap_or(usize::MAX) - buf.len();
        let take = room.min(rest.len());
        buf.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if buf.len() as u64 == PACK_BYTES {
            packs.insert(pack_no, buf.as_slice())?;
            buf.clear();
            pack_no += 1;
        }
        if rest.is_empty() {
            break;
        }
    }
    *log_end = offset + payload.len() as u64;
    *tail = Some(buf);
    Ok(offset)
}

/// Writes the cached partial tail pack, if any.
pub(crate) fn flush_tail(
    packs: &mut Table<u64, &[u8]>,
    log_end: u64,
    tail: Option<Vec<u8>>,
) -> Result<(), redb::Error> {
    if let Some(buf) = tail
        && !buf.is_empty()
    {
        packs.insert(log_end / PACK_BYTES, buf.as_slice())?;
    }
    Ok(())
}

/// Reads `len` bytes at `offset`. `None` when a pack is missing or too short (corruption).
pub(crate) fn read(
    packs: &impl ReadableTable<u64, &'static [u8]>,
    offset: u64,
    len: u32,
) -> Result<Option<Vec<u8>>, redb::Error> {
    let mut out = Vec::with_capacity(len as usize);
    let end = offset + u64::from(len);
    let mut pos = offset;
    while pos < end {
        let pack_no = pos / PACK_BYTES;
        let Some(guard) = packs.get(pack_no)? else {
            return Ok(None);
        };
        let data = guard.value();
        let start = usize::try_from(pos % PACK_BYTES).unwrap_or(usize::MAX);
        let want = usize::try_from((end - pos).min(PACK_BYTES - pos % PACK_BYTES)).unwrap_or(0);
        let Some(slice) = data.get(start..start + want) else {
            return Ok(None);
        };
        out.extend_from_slice(slice);
        pos += want as u64;
    }
    Ok(Some(out))
}
