use super::*;

fn restore() -> Writer {
    Writer::Op {
        session: None,
        what: "restore to 3f2a9c1e".into(),
    }
}

/// A path deleted by the user and restored again 9 times: 17 writes of 2 versions by 2
/// writers.
fn toggled() -> LedgerEntry {
    let v = Some((EntryKind::File, ObjectId([7; 32])));
    let mut e = next(None, v, restore());
    for _ in 0..8 {
        e = next(Some(e), None, Writer::User);
        e = next(Some(e), v, restore());
    }
    e
}

#[test]
fn an_entry_reads_back_as_written_and_repeats_nothing() {
    let e = toggled();
    assert_eq!(e.earlier.len(), EARLIER);
    let bytes = e.encode().unwrap();
    assert_eq!(LedgerEntry::decode(&bytes).unwrap(), e);
    // Each version and writer once: the first form held 17 of each.
    let first_form = encode(&LedgerEntry {
        version: HISTORY_VERSION,
        ..e.clone()
    })
    .unwrap();
    assert!(
        bytes.len() * 5 < first_form.len(),
        "{} vs {}",
        bytes.len(),
        first_form.len()
    );
}

#[test]
fn an_update_of_the_stored_form_is_the_update_of_the_entry() {
    // 40 writes of 25 versions by 7 writers: the oldest fall out of the history, and
    // their versions and writers with them.
    let writer = |i: u8| Writer::Turn {
        session: [i % 7; 32],
        turn: u64::from(i % 3),
        step: None,
    };
    let version =
        |i: u8| (!i.is_multiple_of(5)).then_some((EntryKind::File, ObjectId([i % 25; 32])));
    let (mut e, mut p) = (None, None);
    for i in 0..40 {
        e = Some(next(e, version(i), writer(i)));
        p = Some(pushed(p, version(i), &writer(i)));
        let (e, p) = (e.as_ref().unwrap(), p.as_ref().unwrap());
        let read = LedgerEntry::decode(&p.bytes().unwrap()).unwrap();
        assert_eq!((read.left, &read.writer), (e.left, &e.writer), "write {i}");
        assert_eq!(read.earlier, e.earlier, "write {i}");
        assert_eq!(p.left(), e.left);
        // Each version and writer a write names, and only those.
        let distinct = |of: &dyn Fn(&(u8, u8)) -> u8| {
            let mut all: Vec<u8> = p.history.iter().map(of).collect();
            all.sort_unstable();
            all.dedup();
            all.len()
        };
        assert_eq!(p.versions.len(), distinct(&|h| h.0), "write {i}");
        assert_eq!(p.writers.len(), distinct(&|h| h.1), "write {i}");
    }
}

#[test]
fn entries_of_the_first_form_still_read() {
    let e = LedgerEntry {
        version: HISTORY_VERSION,
        ..toggled()
    };
    assert_eq!(LedgerEntry::decode(&encode(&e).unwrap()).unwrap(), e);
}

#[test]
fn a_damaged_entry_is_an_error_not_a_panic() {
    let bytes = toggled().encode().unwrap();
    for cut in 0..bytes.len() {
        assert!(LedgerEntry::decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let bad = encode(&Packed {
        version: PACKED_VERSION,
        time_ms: 1,
        versions: vec![None],
        writers: vec![Writer::User],
        history: vec![(0, 0), (1, 0)],
    })
    .unwrap();
    assert!(LedgerEntry::decode(&bad).is_err());
    let empty = encode(&Packed {
        version: PACKED_VERSION,
        time_ms: 1,
        versions: vec![],
        writers: vec![],
        history: vec![],
    })
    .unwrap();
    assert!(LedgerEntry::decode(&empty).is_err());
}
