#!/usr/bin/env python3
"""The fleet test's client on the front: posts the batches of the JSON file
argv[1] to the front's site one after another and prints the statuses and
the records degraded (X-Enrich-Degraded) as one JSON object."""
import http.client
import json
import sys

batches = json.load(open(sys.argv[1]))
c = http.client.HTTPConnection("127.0.0.1", 8080, timeout=15)
out = {"statuses": {}, "degraded": 0}
for b in batches:
    c.request("POST", "/v1/enrich", body=json.dumps(b))
    r = c.getresponse()
    r.read()
    out["statuses"][str(r.status)] = out["statuses"].get(str(r.status), 0) + 1
    out["degraded"] += int(r.getheader("X-Enrich-Degraded", "0"))
print(json.dumps(out))
