#!/usr/bin/env python3
"""check_cluster_cli.py ETCD TW-CLUSTER WORKDIR

tw-cluster's command line, as the other tools' (check_cli.py): -h and --help print the usage
on stdout and exit 0, --version prints "tw-cluster (tickwheel) VERSION" and exits 0, a bad
command line is one line on stderr naming what is wrong (and a hint line), exit status 2; an
etcd that cannot be reached is exit status 1. Then its output against a real etcd (one member
on 127.0.0.1, free ports, data in WORKDIR) holding a cluster written here through etcd's JSON
gateway, as libtickwheel-cluster writes it: members, owners with their tokens, a job's
schedule and last claimed fire time, and deferred tasks, claims and dead letters in the layout
of cluster/defer.h (so that this checks the tool apart from the replica that writes them): the
counts in the status, `task KEY` in each state, `dead` page by page, `requeue`.
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


def b64(t):
    return base64.b64encode(t if isinstance(t, bytes) else t.encode()).decode()


def post(url, path, body):
    req = urllib.request.Request(url + path, method='POST', data=json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def put(url, key, value):
    return post(url, '/v3/kv/put', {'key': b64(key), 'value': b64(value)})['header']['revision']


def get(url, key):
    kvs = post(url, '/v3/kv/range', {'key': b64(key)}).get('kvs', [])
    return base64.b64decode(kvs[0].get('value', '')) if kvs else None


def group_of(key, groups):
    """tw_cluster_group_of: FNV-1a of the key, modulo the groups."""
    h = 2166136261
    for ch in key.encode():
        h = ((h ^ ch) * 16777619) & 0xffffffff
    return h % groups


def record(kind, due_ms, attempts, max_attempts, backoff_ms, payload, last_code=None):
    head = 'tw1 %s %d %d %d %d' % (kind, due_ms, attempts, max_attempts, backoff_ms)
    if last_code is not None:
        head += ' %d' % last_code
    return (head + '\n').encode() + payload


def expect(argv, code, want=(), err=None):
    res = run(argv)
    missing = [w for w in want if w not in res.stdout]
    if res.returncode != code or missing or (err is not None and err not in res.stderr):
        fail('exit %d, %s in the output%s' % (code, missing or want,
                                               ', %r on stderr' % err if err else ''), argv, res)
    return res


def check_tasks(tool, url, p):
    """Deferred tasks written as the replicas write them, read back through the tool."""
    groups = 2
    tkey = lambda key: '%sdefer/t/%04d/%s' % (p, group_of(key, groups), key)
    ckey = lambda key: '%sdefer/c/%04d/%s' % (p, group_of(key, groups), key)
    put(url, tkey('order:1'), record('order.timeout', 1796339000000, 0, 5, 1000, b'{"id":1}'))
    put(url, tkey('order:2'), record('order.timeout', 1796339001000, 1, 5, 1000, b'\x00\n'))
    put(url, ckey('order:2'), '2 gw-1 4242')
    for i, key in enumerate(('mail:1', 'mail:10', 'mail:2')):
        put(url, p + 'dead/' + key, record('mail', 1796338000000 + i, 3, 3, 250,
                                           b'to=' + key.encode(), last_code=7 + i))
    put(url, tkey('mail:2'), record('mail', 1796339000000, 0, 3, 250, b''))
    base = [tool, '--endpoints', url, '--prefix', p]

    expect(base, 0, ['deferred tasks: 3 live (1 claimed), 3 dead letters'])
    expect(base[:1] + ['task', 'order:1'] + base[1:], 0,
           ['order:1: pending, kind order.timeout, group %d' % group_of('order:1', groups),
            '2026-12-03T', '(1796339000000)', 'attempts    0 of 5 made', 'backoff     1000 ms',
            'payload     8 bytes: "{\\"id\\":1}"'])
    expect(base[:1] + ['task', 'order:2'] + base[1:], 0,
           ['order:2: claimed', 'attempt 2 of 5, by gw-1 with token 4242',
            'payload     2 bytes: "\\x00\\n"'])
    res = expect(base[:1] + ['task', 'mail:2'] + base[1:], 0,
                 ['mail:2: pending', 'mail:2: dead letter', 'last code   9', 'attempts    3 of 3'])
    if res.stdout.index('pending') > res.stdout.index('dead letter'):
        fail('the live task first, then the dead letter', None, res)
    expect(base[:1] + ['task', 'nothing:here'] + base[1:], 0, ['no task and no dead letter'])
    expect([tool, 'task', 'order:1', '--endpoints', url, '--prefix', '/empty/'], 1,
           err='no cluster under /empty/')

    # Key order, in pages: "mail:10" sorts between "mail:1" and "mail:2".
    res = expect(base[:1] + ['dead', '--limit', '2'] + base[1:], 0,
                 ['dead letters (2, more follow)', 'mail:1 ', 'mail:10 ',
                  'next page: tw-cluster dead --after mail:10'])
    if 'mail:2' in res.stdout:
        fail('a page of 2 shows 2', None, res)
    res = expect(base[:1] + ['dead', '--after', 'mail:10', '--limit', '2'] + base[1:], 0,
                 ['dead letters (1)', 'mail:2 ', '        9  2026-12-03T'])
    if 'next page' in res.stdout or 'mail:1 ' in res.stdout:
        fail('the last page', None, res)

    # Re-queue: refused while a live task has the key; then done once, as a fresh task.
    expect(base[:1] + ['requeue', 'mail:2'] + base[1:], 1, err='a live task has the key')
    if get(url, p + 'dead/mail:2') is None:
        fail('a refused requeue left the dead letter')
    expect(base[:1] + ['requeue', 'mail:1', '--due-ms', '1796339500000'] + base[1:], 0,
           ['mail:1: re-queued, due 2026-12-03T'])
    if get(url, p + 'dead/mail:1') is not None:
        fail('the dead letter stayed after its requeue')
    if get(url, tkey('mail:1')) != record('mail', 1796339500000, 0, 3, 250, b'to=mail:1'):
        fail('the re-queued task: %r' % get(url, tkey('mail:1')))
    expect(base[:1] + ['task', 'mail:1'] + base[1:], 0,
           ['mail:1: pending, kind mail', '(1796339500000)', 'attempts    0 of 3 made'])
    expect(base[:1] + ['requeue', 'mail:1'] + base[1:], 1, err='no dead letter has the key')
    expect(base, 0, ['deferred tasks: 4 live (1 claimed), 2 dead letters'])


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
                        ([tool, '--endpoints', ','], 'endpoints'), ([tool, 'task'], 'KEY'),
                        ([tool, 'task', 'a b'], 'a b'), ([tool, 'dead', '--limit', '0'], '--limit'),
                        ([tool, 'dead', '--after', ''], '--after'),
                        ([tool, 'jobs', '--after', 'k'], '--after'),
                        ([tool, 'task', 'k', '--due-ms', '1'], '--due-ms'),
                        ([tool, 'requeue', 'k', '--due-ms', '-1'], '--due-ms'),
                        ([tool, 'requeue', 'k', 'l'], "'l'"), ([tool, 'dead', 'jobs'], 'jobs')):
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
        check_tasks(tool, url, p)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    print('check_cluster_cli: tw-cluster behaves')


if __name__ == '__main__':
    main()
