/* One copy from another process's memory through process_vm_readv (Linux
 * cross-memory attach, CMA) against a memcpy of the same size in this
 * process, per call, for the alltoallv notes in docs/guide/benchmarking.md.
 * gcc -O2 -o /tmp/cma_copy scripts/cma_copy.c && /tmp/cma_copy BYTES ITERATIONS
 * (needs ptrace permission on the child: same user, Yama ptrace_scope 0,
 * or root). */
#define _GNU_SOURCE
#include <sys/uio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){ size_t n=atol(v[1]); int it=atoi(v[2]);
 char*src=mmap(0,n,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0); memset(src,7,n);
 int p[2]; pipe(p); pid_t pid=fork(); if(!pid){ char*b=malloc(n); memset(b,3,n); write(p[1],&b,sizeof b); sleep(30); _exit(0);}
 char*rb; read(p[0],&rb,sizeof rb); char*dst=malloc(n); memset(dst,0,n);
 struct iovec l={dst,n}, r={rb,n};
 for(int i=0;i<10;i++) process_vm_readv(pid,&l,1,&r,1,0);
 double t=now(); for(int i=0;i<it;i++){ if(process_vm_readv(pid,&l,1,&r,1,0)!=(ssize_t)n){perror("cma");return 1;} } double a=(now()-t)/it*1e6;
 t=now(); for(int i=0;i<it;i++){ memcpy(dst,src,n); __asm__ volatile(""::"r"(dst):"memory"); } double b=(now()-t)/it*1e6;
 printf("%zu B: cma %.2f us, memcpy %.2f us, dst[5]=%d\n",n,a,b,dst[5]); kill(pid,9); return 0;}
