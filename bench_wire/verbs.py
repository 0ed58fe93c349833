"""Every verb of the wire protocol, named once (stdlib only: the CLI's fast path uses it).
No other package spells a verb (tests/unit/test_verbs.py scans them).
"""

HELLO = "hello"
STOP = "stop"
MAIL_SEND = "mail/send"
MAIL_LIST = "mail/list"
MAIL_READ = "mail/read"
MAIL_SEARCH = "mail/search"
MAIL_THREAD = "mail/thread"
MAIL_REPLY = "mail/reply"
MAIL_SENT_LIST = "mail/sent-list"
MAIL_STATUS = "mail/status"
MAIL_WAIT = "mail/wait"
EVENTS = "events"
SESSION_SPAWN = "session/spawn"
SESSION_LIST = "session/list"
SESSION_KILL = "session/kill"
SESSION_PRUNE = "session/prune"
SESSION_TYPE = "session/type"
SESSION_TAIL = "session/tail"
SESSION_SCREEN = "session/screen"
SESSION_ATTACH = "session/attach"
SESSION_INPUT = "session/input"
SESSION_RESIZE = "session/resize"
SESSION_DETACH = "session/detach"
JOB_REPORT = "job/report"
JOB_WAIT = "job/wait"
AGENT_REPORT = "agent/report"
AGENT_ANSWER = "agent/answer"
JOURNAL_ACK = "journal/ack"
DEBUG_FAULT = "debug/fault"
BRIDGE_PULL = "bridge/pull"
BRIDGE_FORWARDED = "bridge/forwarded"
BRIDGE_DELIVER = "bridge/deliver"
BRIDGE_REPORT = "bridge/report"
BRIDGE_BOUNCE = "bridge/bounce"
BRIDGE_RECEIPTS_PULL = "bridge/receipts-pull"
BRIDGE_RECEIPTS = "bridge/receipts"
BRIDGE_NODES = "bridge/nodes"

# The events an agent's hook reports with AGENT_REPORT (`bench hook EVENT`): the CLI
# accepts these and benchd.core.agentstate steps an agent's state by them.
HOOK_EVENTS = (
    "start",
    "prompt",
    "stop",
    "interrupt",
    "stop-failure",
    "permission",
    "notification",
    "end",
    "tool",
)

# Answered with frames carrying the request's id up to one `end` frame (or an error).
STREAMS = frozenset({EVENTS, SESSION_TAIL, SESSION_SCREEN, SESSION_ATTACH})
