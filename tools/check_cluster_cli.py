#!/usr/bin/env python3
"""check_cluster_cli.py ETCD TW-CLUSTER WORKDIR

tw-cluster's command line, as the other tools' (check_cli.py): -h and --help print the usage
on stdout and exit 0, --version prints "tw-cluster (tickwheel) VERSION" and exits 0, a bad
command line is one line on stderr naming what is wrong (and a hint line), exit status 2; an
etcd that cannot be reached is exit status 1. Then its output against a real etcd (one member
on 127.0.0.1, free ports, data in WORKDIR) holding a cluster written here through etcd's JSON
gateway, as libtickwheel-cluster writes it: members, owners with their tokens, a job's
schedule and last claimed fire time.
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request


def fail(why, argv=None, res=None):
    print('check_cluster_cli: FAIL: ' + why)
    if argv is not None:
        print('  ran: %s' % ' '.join(argv))
    if res is not None:
        print('  exit %d\n  stdout: %r\n  stderr: %r' % (res.returncode, res.stdout, res.stderr))
    sys.exit(1)


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def put(url, key, value):
    b64 = lambda t: base64.b64encode(t.encode()).decode()
    req = urllib.request.Request(url + '/v3/kv/put', method='POST',
                                 data=json.dumps({'key': b64(key), 'value': b64(value)}).encode())
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())['header']['revision']


def main():
    etcd, tool, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    for flag in ('-h', '--help'):
        res = run([tool, flag])
        if res.returncode != 0 or not res.stdout.startswith('usage: tw-cluster') or res.stderr:
            fail('%s: usage on stdout, exit 0' % flag, [tool, flag], res)
    res = run([tool, '--version'])
    if res.returncode != 0 or not res.stdout.startswith('tw-cluster (tickwheel) '):
        fail('--version', [tool, '--version'], res)
    for argv, names in (([tool, '--bogus'], '--bogus'), ([tool, 'nothing'], 'nothing'),
                        ([tool, '--timeout', 'soon'], 'soon'), ([tool, '--prefix'], '--prefix'),
                        ([tool, '--endpoints', ','], 'endpoints')):
        res = run(argv)
        lines = res.stderr.strip().splitlines()
        if res.returncode != 2 or res.stdout or not lines or names not in lines[0] or len(lines) > 2:
            fail('a bad command line: one line naming it, exit 2', argv, res)
    nowhere = [tool, '--endpoints', 'http://127.0.0.1:%d' % free_port(), '--timeout', '500ms']
    res = run(nowhere)
    if res.returncode != 1 or 'no etcd endpoint answered' not in res.stderr:
        fail('an etcd that cannot be reached: exit 1 with the reason', nowhere, res)

    client, peer = free_port(), free_port()
    url = 'http://127.0.0.1:%d' % client
    log = open(os.path.join(work, 'etcd.log'), 'w')
    proc = subprocess.Popen([etcd, '--name', 'cli', '--data-dir', os.path.join(work, 'data'),
                             '--listen-client-urls', url, '--advertise-client-urls', url,
                             '--listen-peer-urls', 'http://127.0.0.1:%d' % peer,
                             '--initial-advertise-peer-urls', 'http://127.0.0.1:%d' % peer,
                             '--initial-cluster', 'cli=http://127.0.0.1:%d' % peer],
                            stdout=log, stderr=log)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + '/health', timeout=1).read()
                break
            except Exception:
                time.sleep(0.1)
        else:
            fail('etcd did not start (%s)' % os.path.join(work, 'etcd.log'))
        p = '/cli/'
        put(url, p + 'config/groups', '2')
        put(url, p + 'members/gw-2', 'gw-2')
        put(url, p + 'members/gw-1', 'gw-1')
        token = put(url, p + 'owners/0001', 'gw-2')
        put(url, p + 'jobs/report', 'period_ms=1000 phase_ms=0 misfire=0')
        put(url, p + 'last/report', '%015d' % 1796339000000)
        argv = [tool, '--endpoints', url, '--prefix', p]
        res = run(argv)
        out = res.stdout
        want = ['2 groups', 'members (2)\n  gw-1\n  gw-2\n', '     0  (free)',
                '     1  gw-2', ' %s\n' % token, 'report', '2026-12-03T', 'period_ms=1000']
        if res.returncode != 0 or any(w not in out for w in want):
            fail('the cluster as written: %s' % [w for w in want if w not in out], argv, res)
        res = run([tool, 'members', '--endpoints', url, '--prefix', p])
        if res.returncode != 0 or res.stdout != 'members (2)\n  gw-1\n  gw-2\n':
            fail('members alone', None, res)
        res = run([tool, 'jobs', '--endpoints', url, '--prefix', '/empty/'])
        if res.returncode != 0 or 'report' in res.stdout:
            fail('another prefix shows nothing of this one', None, res)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    print('check_cluster_cli: tw-cluster behaves')


if __name__ == '__main__':
    main()
