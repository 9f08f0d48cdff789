"""Round 4's classes (issue 25): the kinds of defect it counted, so before/after compare like with like."""

CLASSES = {
    0: "data loss",
    1: "hangs / unbounded cost",
    2: "secret leaks",
    3: "tracebacks",
    4: "wrong exits",
    5: "misleading messages",
    6: "trusts what it should check",
    7: "left running / left behind",
}
