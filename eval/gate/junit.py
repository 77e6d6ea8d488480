"""JUnit XML of a gate verdict: one test case per rule, so CI systems show each rule."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from eval.atomic import atomic_write
from eval.gate.verdict import EXIT_NO_VERDICT, FAIL, NO_DATA, SKIPPED, Verdict


def junit_xml(verdict: Verdict, suite: str) -> bytes:
    """One test case per rule (skipped rules as skipped); a no-verdict adds a `data` case in error."""
    root = ET.Element("testsuites")
    cases = []
    for r in verdict.results:
        case = ET.Element("testcase", classname="lbeval.gate", name=r.rule)
        message = f"measured {r.measured}; threshold {r.threshold}" + (f" ({r.detail})" if r.detail else "")
        if r.status == FAIL and r.failed_rows:
            message += "; failing rows: " + ", ".join(r.failed_rows)
        if r.status == FAIL:
            ET.SubElement(case, "failure", message=message, type="rule failed").text = message
        elif r.status == NO_DATA:
            ET.SubElement(case, "error", message=message, type="no data").text = message
        elif r.status == SKIPPED:
            ET.SubElement(case, "skipped", message=r.threshold)
        else:
            ET.SubElement(case, "system-out").text = message
        cases.append(case)
    if verdict.exit_code == EXIT_NO_VERDICT:
        case = ET.Element("testcase", classname="lbeval.gate", name="data")
        text = "; ".join(verdict.reasons)
        ET.SubElement(case, "error", message=text, type="no verdict").text = text
        cases.append(case)
    counts = {
        "tests": str(len(cases)),
        "failures": str(sum(c.find("failure") is not None for c in cases)),
        "errors": str(sum(c.find("error") is not None for c in cases)),
        "skipped": str(sum(c.find("skipped") is not None for c in cases)),
    }
    ts = ET.SubElement(root, "testsuite", {"name": suite, **counts})
    ts.extend(cases)
    root.attrib.update(counts)
    text = ET.tostring(root, encoding="unicode")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + text + "\n").encode("utf-8")


def write_junit(path: Path, verdict: Verdict, suite: str) -> None:
    atomic_write(path, junit_xml(verdict, suite).decode("utf-8"))
