#!/usr/bin/env python3
"""Checks the OCI image layout `make image` writes (scripts/image.sh).

    check_oci.py LAYOUT_DIR TAG

The layout: index.json names TAG; every blob's sha256 and size are what the descriptors say; each
layer's diff_id is the sha256 of its uncompressed tar. The image: two layers, the first a Debian 12
base (etc/debian_version), the second /opt/gantry (bin/gantry executable, lib/, licenses/), the user
gantry (10001) in etc/passwd, /usr/local/bin/gantry a symlink to it; no setuid/setgid file and no
world-writable file in the second layer. The config: user 10001:10001 (not root), entrypoint
/opt/gantry/bin/gantry serve, ports 8080/tcp and 8081/tcp exposed, TMPDIR and caches under /tmp.
Prints one line per check; exit 1 when any fails.
"""
import gzip
import hashlib
import json
import os
import sys
import tarfile

failures = 0


def check(what, ok):
    global failures
    print(("ok: " if ok else "FAIL: ") + what)
    failures += 0 if ok else 1


def blob(layout, digest):
    algo, hexd = digest.split(":")
    assert algo == "sha256", digest
    return os.path.join(layout, "blobs", "sha256", hexd)


def verified(layout, desc):
    path = blob(layout, desc["digest"])
    data = open(path, "rb").read()
    ok = hashlib.sha256(data).hexdigest() == desc["digest"].split(":")[1] and len(data) == desc["size"]
    check(f"blob {desc['digest'][:19]} matches its digest and size ({desc['size']} bytes)", ok)
    return data


def main(layout, tag):
    index = json.load(open(os.path.join(layout, "index.json")))
    check("oci-layout file present", os.path.isfile(os.path.join(layout, "oci-layout")))
    refs = [m for m in index["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
    check(f"index.json names tag {tag}", len(refs) == 1)
    if not refs:
        return
    manifest = json.loads(verified(layout, refs[0]))
    config = json.loads(verified(layout, manifest["config"]))
    layers = manifest["layers"]
    check("two layers (the Debian base, then Gantry)", len(layers) == 2)
    check("layers are gzip tars", all(l["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip" for l in layers))
    members = []
    for i, desc in enumerate(layers):
        raw = gzip.decompress(verified(layout, desc))
        check(f"layer {i + 1}: diff_id is the sha256 of the uncompressed tar",
              config["rootfs"]["diff_ids"][i] == "sha256:" + hashlib.sha256(raw).hexdigest())
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"layer-{os.getpid()}-{i}.tar")
        with open(path, "wb") as f:
            f.write(raw)
        with tarfile.open(path) as t:
            members.append({m.name.lstrip("./"): (m, t.extractfile(m).read() if m.isfile() and m.size < 65536 else None)
                            for m in t.getmembers()})
        os.unlink(path)
    base, top = members
    deb = base.get("etc/debian_version", (None, b""))[1] or b""
    check(f"layer 1 is Debian 12 (etc/debian_version {deb.decode().strip()})", deb.startswith(b"12."))
    check("layer 1 has a shell and libstdc++ (minbase)", "usr/bin/bash" in base and
          any(n.startswith("usr/lib/x86_64-linux-gnu/libstdc++.so.6") for n in base))
    g = top.get("opt/gantry/bin/gantry", (None, None))[0]
    check("layer 2: /opt/gantry/bin/gantry, executable, owned by root", g is not None and g.mode & 0o111 and g.uid == 0)
    check("layer 2: the bundle's lib/ and licenses/", any(n.startswith("opt/gantry/lib/libgantry_engine.so") for n in top)
          and any(n.startswith("opt/gantry/licenses/") for n in top))
    link = top.get("usr/local/bin/gantry", (None, None))[0]
    check("layer 2: /usr/local/bin/gantry -> /opt/gantry/bin/gantry", link is not None and link.issym()
          and link.linkname == "/opt/gantry/bin/gantry")
    passwd = (top.get("etc/passwd", (None, b""))[1] or b"").decode()
    check("layer 2: user gantry is uid/gid 10001 in /etc/passwd", "gantry:x:10001:10001:" in passwd)
    special = [n for n, (m, _) in top.items() if m.mode & 0o6000 or (m.isfile() and m.mode & 0o002)]
    check("layer 2: no setuid/setgid or world-writable file", not special)
    c = config["config"]
    check(f"config user {c.get('User')} (not root)", c.get("User") == "10001:10001")
    check(f"config entrypoint {c.get('Entrypoint')}", c.get("Entrypoint") == ["/opt/gantry/bin/gantry", "serve"])
    check(f"config exposes {sorted(c.get('ExposedPorts', {}))}", sorted(c.get("ExposedPorts", {})) == ["8080/tcp", "8081/tcp"])
    env = dict(e.split("=", 1) for e in c.get("Env", []))
    check("config env: TMPDIR and caches under /tmp", env.get("TMPDIR") == "/tmp"
          and env.get("GANTRY_CACHE_DIR", "").startswith("/tmp/") and env.get("XDG_CACHE_HOME", "").startswith("/tmp/"))
    check(f"config os/architecture {config.get('os')}/{config.get('architecture')}",
          config.get("os") == "linux" and config.get("architecture") == "amd64")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
    sys.exit(1 if failures else 0)
