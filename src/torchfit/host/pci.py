"""GPUs on the PCI bus, from sysfs: what is there even when no driver answers."""

import glob
import os

from torchfit.host._io import _read, _under


def parse_pci_vendor(vendor: str, pci_class: str) -> str | None:
    """A PCI device's sysfs `vendor` and `class` -> "NVIDIA"/"AMD" for GPUs, else None.

    Display controllers are PCI base class 0x03 (VGA 0x0300, 3D 0x0302, other
    0x0380: PCI Code and ID Assignment Specification); NVSwitches (0x0680) are not
    GPUs. Vendor IDs: 0x10de NVIDIA, 0x1002 AMD (PCI-SIG vendor list).
    """
    if not pci_class.strip().lower().startswith("0x03"):
        return None
    return {"0x10de": "NVIDIA", "0x1002": "AMD"}.get(vendor.strip().lower())

def find_pci_gpus(root: str = "/") -> dict[str, int]:
    """Count GPUs on the PCI bus by vendor ({"NVIDIA": 2}), from sysfs; no driver needed."""
    counts: dict[str, int] = {}
    for dev in glob.glob(_under(root, "/sys/bus/pci/devices/*")):
        vendor = _read(os.path.join(dev, "vendor"))
        pci_class = _read(os.path.join(dev, "class"))
        if vendor is None or pci_class is None:
            continue
        name = parse_pci_vendor(vendor, pci_class)
        if name:
            counts[name] = counts.get(name, 0) + 1
    return counts
