#!/usr/bin/env python3
"""Medians over runs of bench_disk_tier tables that bench/disk_tier_ab.sh
collected: python3 bench/disk_tier_summary.py throughput|serving OUTDIR.
Prints one markdown table: per block size (throughput) or block set and call
(serving), and per binary (old, new), the median over runs of each figure
and, for the ratios, [min-max] over the runs."""
import glob
import statistics as st
import sys


def throughput(d):
    rows={}
    for f in sorted(glob.glob(d+'/*-*.txt')):
        b=f.split('/')[-1].split('-')[0]
        for l in open(f):
            if 'KiB x' not in l: continue
            c=[x.strip() for x in l.split('|')]
            size=c[1]
            num=lambda x: float(x.split()[0])
            row=dict(w=num(c[2]),cw=num(c[3]),seq=num(c[4]),wr=float(c[7]),cwr=float(c[8]),ld=num(c[10]),ldc=num(c[11]),sr=num(c[12]),lr=float(c[15]),lcr=float(c[16]))
            # summed load+check (bench_disk_tier since the disk-reads branch);
            # older binaries: their load+check (they have no summed path)
            row['lsc'],row['lscr']=(num(c[18]),float(c[19])) if len(c)>20 and c[18] else (row['ldc'],row['lcr'])
            rows.setdefault((size,b),[]).append(row)
    print("| block | tree | runs | store write | copy+write | seq write | **store/seq** | copy+write/seq | load | load+check | seq read | **load/seq** | load+check/seq | summed load+check | **summed load+check/seq** |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (size,b),v in sorted(rows.items(), key=lambda k:(int(k[0][0].split()[0]),k[0][1]!='old')):
        m=lambda k: st.median([x[k] for x in v])
        rng=lambda k: "%.2f [%.2f-%.2f]"%(m(k),min(x[k] for x in v),max(x[k] for x in v))
        print(f"| {size} | {b} | {len(v)} | {m('w'):.0f} | {m('cw'):.0f} | {m('seq'):.0f} | {rng('wr')} | {rng('cwr')} | {m('ld'):.0f} | {m('ldc'):.0f} | {m('sr'):.0f} | {rng('lr')} | {rng('lcr')} | {m('lsc'):.0f} | {rng('lscr')} |")


def serving(d):
    rows={}
    short={'1 layer fp8, dim 1 (16 B)':'16 B','4 layers x 2 heads x 64, bf16 (32 KiB)':'32 KiB','8 layers x 8 heads x 128, bf16 (512 KiB)':'512 KiB'}
    for f in sorted(glob.glob(d+'/*-*.txt')):
        b=f.split('/')[-1].split('-')[0]
        for l in open(f):
            if not l.startswith('| ') or ' us |' not in l: continue
            c=[x.strip() for x in l.split('|')]
            f1=lambda x: float(x.split()[0])
            pair=lambda x: (float(x.split('/')[0]), float(x.split('/')[1].split()[0]))
            cp50=pair(c[8]); cp99=pair(c[9])
            rows.setdefault((short[c[1]],c[2],b),[]).append(dict(w50o=f1(c[3]),w50n=f1(c[4]),w99o=f1(c[5]),w99n=f1(c[6]),wr=float(c[7]),c50o=cp50[0],c50n=cp50[1],c99o=cp99[0],c99n=cp99[1],cr=float(c[10]) if c[10] not in ('-nan','nan','inf') else float('nan'),drops=int(c[13])))
    print("| block set | call | tree | runs | wall p50 off / on (us) | wall p99 off / on (us) | **wall p99 on/off** | CPU p50 off / on (us) | CPU p99 off / on (us) | **CPU p99 on/off** |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    order={'16 B':0,'32 KiB':1,'512 KiB':2}; corder={'add':0,'commit':1,'remove':2,'make_room (ahead)':3,'round (sum)':4}
    for k in sorted(rows, key=lambda k:(order[k[0]],corder[k[1]],k[2]!='old')):
        v=rows[k]; m=lambda x: st.median([r[x] for r in v])
        rng=lambda x: "%.2f [%.2f-%.2f]"%(m(x),min(r[x] for r in v),max(r[x] for r in v))
        print(f"| {k[0]} | {k[1]} | {k[2]} | {len(v)} | {m('w50o'):.1f} / {m('w50n'):.1f} | {m('w99o'):.1f} / {m('w99n'):.1f} | {rng('wr')} | {m('c50o'):.2f} / {m('c50n'):.2f} | {m('c99o'):.2f} / {m('c99n'):.2f} | {rng('cr')} |")


if __name__ == "__main__":
    {"throughput": throughput, "serving": serving}[sys.argv[1]](sys.argv[2])
