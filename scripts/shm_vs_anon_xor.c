/* Random XOR updates (HPCC's stream, 2048 per round) on memory mapped from
 * /dev/shm (as a gaspi window is) and on anonymous memory (as an MPI
 * code's Vec is), alternated: does the table's kind of memory change
 * GUPS's update loop? (docs/guide/benchmarking.md, application kernels.)
 *
 *   gcc -O2 -o /tmp/shmxor scripts/shm_vs_anon_xor.c && /tmp/shmxor $((16 << 20))
 *
 * BYTES must be a power of two. Prints the mean time per round of 2048
 * updates, 5 times each, alternating the two kinds. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static double run(uint64_t *t, size_t words, int rounds){
  uint64_t a=1; double t0=now();
  for(int r=0;r<rounds;r++) for(int k=0;k<2048;k++){ a=(a<<1)^((int64_t)a<0?7:0); t[a&(words-1)]^=a; }
  return (now()-t0)/rounds;
}
int main(int argc,char**argv){
  size_t bytes=(size_t)atol(argv[1]); size_t words=bytes/8;
  uint64_t *anon=mmap(0,bytes,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  char name[64]; snprintf(name,sizeof name,"/shm-vs-anon-%d",(int)getpid());
  int fd=shm_open(name,O_RDWR|O_CREAT|O_EXCL,0600); shm_unlink(name);
  if(fd<0||ftruncate(fd,bytes)!=0){perror("shm");return 1;}
  uint64_t *shm=mmap(0,bytes,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
  for(size_t i=0;i<words;i++){anon[i]=i;shm[i]=i;}
  for(int i=0;i<5;i++) printf("anon %.2f us  shm %.2f us\n", run(anon,words,1000), run(shm,words,1000));
  return 0;
}
