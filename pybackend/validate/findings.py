"""What `pybackend validate` reports: findings (an error tritonserver or the backend would
refuse the model for, or a warning: the server lets it through but it is likely wrong)
about one model, each with the file and line it is about."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

ERROR = "error"
WARNING = "warning"
NOTE = "note"


@dataclass
class Finding:
    severity: str  # error, warning, note
    check: str  # a short stable id: dims, data-type, parameter, execute...
    message: str
    file: str = ""  # relative to the model directory: config.pbtxt, 1/model.py
    line: int = 0  # 1-based; 0: the file as a whole
    column: int = 0

    def where(self, model_dir: Path) -> str:
        place = str(model_dir / self.file) if self.file else str(model_dir)
        if self.line:
            place += f":{self.line}"
            if self.column:
                place += f":{self.column}"
        return place


@dataclass
class ModelReport:
    name: str
    path: Path
    findings: List[Finding] = field(default_factory=list)
    skipped: str = ""  # why the model was not checked (not a Python model)

    def add(
        self,
        severity: str,
        check: str,
        message: str,
        file: str = "",
        line: int = 0,
        column: int = 0,
    ) -> None:
        self.findings.append(Finding(severity, check, message, file, line, column))

    def file_of(self, path: Path) -> str:
        """How a finding names ``path``: relative to the model directory, or whole when
        outside it (a python-based backend's model.py)."""
        try:
            return path.relative_to(self.path).as_posix()
        except ValueError:
            return str(path)

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "skipped": self.skipped or None,
            "errors": self.count(ERROR),
            "warnings": self.count(WARNING),
            "findings": [asdict(f) for f in self.findings],
        }


def line_of(text: str, needle: str, after: int = 0) -> int:
    """The 1-based line of ``needle``'s first occurrence in ``text`` (0: absent), from line
    ``after`` on: protobuf's Python parser keeps no positions, so a finding about a field
    points at the line that spells it."""
    lines = text.splitlines()
    for i in range(max(after - 1, 0), len(lines)):
        if needle in lines[i].split("#", 1)[0]:
            return i + 1
    return 0


Location = Optional[int]
