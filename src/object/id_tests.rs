//! Unit tests of `id.rs`.

use super::*;

#[test]
fn blob_id_matches_b3sum_of_empty_input() {
    assert_eq!(
        ObjectId::of_blob(b"").to_hex(),
        "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    );
}

#[test]
fn hex_round_trips_and_rejects_bad_input() {
    let id = ObjectId::of_blob(b"hello");
    assert_eq!(ObjectId::from_hex(&id.to_hex()), Some(id));
    assert_eq!(ObjectId::from_hex("zz"), None);
    assert_eq!(ObjectId::from_hex(&"g".repeat(64)), None);
}

#[test]
fn binary_encoding_is_the_32_raw_bytes() {
    let id = ObjectId([7; 32]);
    assert_eq!(postcard::to_allocvec(&id).unwrap(), vec![7; 32]);
    assert_eq!(postcard::from_bytes::<ObjectId>(&[7; 32]).unwrap(), id);
}

#[test]
fn tree_ids_never_equal_blob_ids_of_the_same_bytes() {
    assert_ne!(ObjectId::of_tree(b"x"), ObjectId::of_blob(b"x"));
}
