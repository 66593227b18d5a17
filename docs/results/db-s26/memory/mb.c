#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t L=262144; int N=4000; char*src=malloc(L); memset(src,7,L);
  void**keep=malloc(N*sizeof(void*));
  double t=now();
  for(int i=0;i<N;i++){void*p=mmap(0,L,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);memcpy(p,src,L);keep[i]=p;}
  printf("mmap+copy kept: %.1f us/op\n",(now()-t)/N*1e6);
  t=now();
  for(int i=0;i<N;i++){void*p=mmap(0,L,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0);memcpy(p,src,L);keep[i]=p;}
  printf("mmap populate+copy kept: %.1f us/op\n",(now()-t)/N*1e6);
  t=now();
  for(int i=0;i<N;i++){munmap(keep[i],L);}
  printf("munmap: %.1f us/op\n",(now()-t)/N*1e6);
  t=now();
  for(int i=0;i<N;i++){void*p=mmap(0,L,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);memcpy(p,src,L);keep[i]=p;}
  printf("mmap+copy kept (2nd, after munmap): %.1f us/op\n",(now()-t)/N*1e6);
  for(int i=0;i<N;i++){munmap(keep[i],L);}
  int fd=open("/work/tgt/mbfile",O_RDWR|O_CREAT|O_TRUNC,0644);
  t=now();
  for(int i=0;i<N;i++){pwrite(fd,src,L,(off_t)i*L);}
  printf("pwrite page cache: %.1f us/op\n",(now()-t)/N*1e6);
  t=now(); fsync(fd); printf("fsync %.3f s\n", now()-t);
  t=now();
  void*r[16];for(int j=0;j<16;j++)r[j]=malloc(L); for(int i=0;i<N;i++){memcpy(r[i%16], src, L);}
  printf("copy to reused: %.1f us/op\n",(now()-t)/N*1e6);
  return 0;}
