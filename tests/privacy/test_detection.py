def test_sets_of_the_same_kinds_share_what_their_patterns_compile_to() -> None:
    from codemode.privacy.detectors import DetectorSet

    first, second = DetectorSet(), DetectorSet()
    assert first._groups is second._groups
    assert first._windowed is second._windowed
    assert DetectorSet(["EMAIL"])._groups is not first._groups
    first.use_native_anchors(False)
    assert first._windowed is not second._windowed, "each set still chooses its own anchors"
    assert second.detect("write to jane.doe@example.com") == first.detect(
        "write to jane.doe@example.com"
    )
