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


def test_detections_are_made_a_field_at_a_time_as_one_by_one() -> None:
    from codemode.privacy.detection import Detection, detection, detections

    found = [("EMAIL", 3, 20, "maria@example.com"), ("PHONE", 25, 40, "+44 20 7946 0958")]
    assert detections(found) == tuple(map(detection, found))
    assert detections(found)[1] == Detection("PHONE", 25, 40, "+44 20 7946 0958")
    assert detections([]) == ()
