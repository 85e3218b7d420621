"""Type stubs of the native module (see sockstat/__init__.py for the documented API)."""

from typing import Any, Dict, List, Optional, Tuple

from ._records import (
    CountersReport,
    DiagnoseReport,
    ListeningPort,
    PortsReport,
    Socket,
    WarningRecord,
    sconn,
)

__all__ = [
    "__version__",
    "counters",
    "diagnose",
    "listening_ports",
    "net_connections",
    "parse_bandwidth",
    "ports",
    "sockets",
]
__version__: str

def sockets(
    filters: Dict[str, Any], details: Dict[str, Any]
) -> Tuple[List[Socket], List[WarningRecord]]: ...
def listening_ports() -> Tuple[List[ListeningPort], List[WarningRecord]]: ...
def net_connections(
    *, inet: bool, inet6: bool, unix: bool, tcp: bool, udp: bool
) -> Tuple[List[sconn], List[WarningRecord]]: ...
def ports(
    filters: Dict[str, Any], interval_s: Optional[float] = None
) -> Tuple[PortsReport, List[WarningRecord]]: ...
def counters(
    interval_s: Optional[float] = None, all: bool = False, proc_root: Optional[str] = None
) -> CountersReport: ...
def diagnose(
    filters: Dict[str, Any], interval_s: float, bandwidth: Optional[float] = None
) -> DiagnoseReport: ...
def parse_bandwidth(text: str) -> float: ...
