#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  size_t L=262144; int N=4000; char*src=malloc(L); memset(src,7,L);
  size_t R=(size_t)N*L;
  char*big=mmap(0,R+(2<<20),PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  big=(char*)(((unsigned long)big+(2<<20)-1)&~((2UL<<20)-1));
  madvise(big,R,MADV_HUGEPAGE);
  double t=now();
  for(int i=0;i<N;i++) memcpy(big+(size_t)i*L,src,L);
  printf("THP region copy: %.1f us/op\n",(now()-t)/N*1e6);
  char*big2=mmap(0,R,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  madvise(big2,R,MADV_NOHUGEPAGE);
  t=now();
  for(int i=0;i<N;i++) memcpy(big2+(size_t)i*L,src,L);
  printf("4K region copy: %.1f us/op\n",(now()-t)/N*1e6);
  int fd=open("/work/tgt/mbfile",O_RDWR|O_CREAT|O_TRUNC,0644);
  char hdr[48]={0};
  t=now();
  for(int i=0;i<N;i++){struct iovec v[2]={{hdr,48},{src,L-48}}; pwritev(fd,v,2,(off_t)i*L);}
  printf("pwritev new pages: %.1f us/op\n",(now()-t)/N*1e6);
  t=now(); fsync(fd); printf("fsync %.3f s\n", now()-t);
  t=now();
  for(int i=0;i<N;i++){struct iovec v[2]={{hdr,48},{src,L-48}}; pwritev(fd,v,2,(off_t)i*L);}
  printf("pwritev over cached pages: %.1f us/op\n",(now()-t)/N*1e6);
  t=now(); fsync(fd); printf("fsync %.3f s\n", now()-t);
  char*dst=malloc(L); memset(dst,1,L);
  t=now();
  for(int i=0;i<N;i++){pread(fd,dst,L,(off_t)((i*7919)%N)*L);}
  printf("pread page cache: %.1f us/op\n",(now()-t)/N*1e6);
  t=now();
  for(int i=0;i<N;i++){memcpy(dst,big+(size_t)((i*7919)%N)*L,L);}
  printf("memcpy from memory: %.1f us/op\n",(now()-t)/N*1e6);
  return 0;}
