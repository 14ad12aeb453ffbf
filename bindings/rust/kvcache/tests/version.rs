//! Version and status basics.

#[test]
fn runtime_version_matches_headers() {
    assert_eq!(kvcache::version(), kvcache::HEADER_VERSION);
    assert_eq!(kvcache::abi_version(), kvcache::HEADER_ABI_VERSION);
    let v = kvcache::HEADER_VERSION;
    let expected = format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
    assert_eq!(kvcache::version_string(), expected);
}
