"""A wheel of this tree under another version, or with other code: what an upgrade
installs. The tree's wheel is rewritten (its logflume/__init__.py, METADATA, the
dist-info directory's name and RECORD), so no second build is needed."""

import base64
import hashlib
import re
import zipfile
from pathlib import Path


def rewritten(wheel: Path, out: Path, version: str | None = None, marker: str = "") -> Path:
    """A copy of `wheel` in `out` whose version (`logflume --version` and the package
    metadata) is `version` (default: the same), and whose logflume/__init__.py ends
    with the comment line `# <marker>` when a marker is given."""
    name, old, *tags = wheel.name.removesuffix(".whl").split("-")
    version = version or old
    info, new_info = f"{name}-{old}.dist-info/", f"{name}-{version}.dist-info/"
    out.mkdir(parents=True, exist_ok=True)
    path = out / ("-".join([name, version, *tags]) + ".whl")
    record = []
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item)
            member = item.filename
            if member.startswith(info):
                member = new_info + member.removeprefix(info)
            if member == new_info + "RECORD":
                continue
            if member == new_info + "METADATA":
                line = f"Version: {version}".encode()
                data, n = re.subn(rb"^Version: .*$", line, data, count=1, flags=re.M)
                assert n == 1, "no Version: in METADATA"
            if member == f"{name}/__init__.py":
                before = f'__version__ = "{old}"'.encode()
                assert before in data, f"{member} has no {before!r}"
                data = data.replace(before, f'__version__ = "{version}"'.encode())
                if marker:
                    data += f"# {marker}\n".encode()
            copy = zipfile.ZipInfo(member, item.date_time)
            copy.external_attr, copy.compress_type = item.external_attr, zipfile.ZIP_DEFLATED
            dst.writestr(copy, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{member},sha256={digest.decode()},{len(data)}")
        record.append(f"{new_info}RECORD,,")
        dst.writestr(new_info + "RECORD", "\n".join(record) + "\n")
    return path
