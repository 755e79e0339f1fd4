// The live charts: SVG line charts over every point since the run began,
// with dashed marks at stage boundaries (steering edits, resets, a sweep's
// steps, [[stages]] windows), labelled in rows of their own between the
// legend and the plot. window.cicadaCharts.draw(points, marks).
(function(){
'use strict';
var NS='http://www.w3.org/2000/svg';
var COLORS=['#1f6feb','#e8590c','#2f9e44','#ae3ec9','#c92a2a'];
var MARK_ROWS=3;

function el(name,attrs,parent){var e=document.createElementNS(NS,name);for(var k in attrs){e.setAttribute(k,attrs[k]);}if(parent){parent.appendChild(e);}return e;}
function fmt(v){if(v===null||v===undefined){return 'n/a';}var a=Math.abs(v);return a>=1000?v.toFixed(0):a>=10?v.toFixed(1):v.toFixed(2);}

// where each mark's label goes: a row of the band between the legend and
// the plot (the first row where it overlaps no other label), starting at
// its line, or ending there when it would run past the right edge; a label
// that fits in no row is left out (its line stays, named on hover)
function placeLabels(marks,x,right){
  var rows=[],placed=[];
  marks.forEach(function(m){
    var w=m.name.length*6.5+6,at=x(m.t),lo=at+2>right-w?at-2-w:at+2,row=-1;
    for(var r=0;r<MARK_ROWS&&row<0;r++){
      if(!(rows[r]||[]).some(function(s){return lo<s[1]&&s[0]<lo+w;})){row=r;}
    }
    if(row>=0){(rows[row]=rows[row]||[]).push([lo,lo+w]);}
    placed.push({m:m,at:at,row:row,end:lo<at});
  });
  return {rows:rows.length,placed:placed};
}
// one line chart: series = [{name, get(point) -> number|null}]
function chart(id,title,unit,series,points,marks){
  var W=560,L=56,R=12,B=34,PLOT=196,BAND=40,ROW=13,box=document.getElementById(id);
  box.textContent='';
  var t0=0,t1=1,y1=0;
  if(points.length){t0=Math.min(0,points[0].t-1);t1=Math.max(points[points.length-1].t,t0+1);}
  var x=function(t){return L+(t-t0)/(t1-t0)*(W-L-R);};
  var shown=marks.filter(function(m){return m.t>=t0&&m.t<=t1;}),labels=placeLabels(shown,x,W-R);
  var T=BAND+labels.rows*ROW+6,H=T+PLOT+B;
  var svg=el('svg',{'class':'chart',viewBox:'0 0 '+W+' '+H,'data-points':String(points.length)},box);
  el('text',{'class':'title',x:L,y:18},svg).textContent=unit?title+' ('+unit+')':title;
  series.forEach(function(s){points.forEach(function(p){var v=s.get(p);if(v!==null&&v!==undefined&&v>y1){y1=v;}});});
  y1=y1>0?y1*1.1:1;
  var y=function(v){return H-B-v/y1*(H-T-B);};
  for(var i=0;i<=4;i++){var v=y1*i/4;el('line',{'class':'grid',x1:L,x2:W-R,y1:y(v),y2:y(v)},svg);el('text',{'class':'tick',x:L-4,y:y(v)+4,'text-anchor':'end'},svg).textContent=fmt(v);}
  for(var j=0;j<=4;j++){var tt=t0+(t1-t0)*j/4;el('text',{'class':'tick',x:x(tt),y:H-B+16,'text-anchor':'middle'},svg).textContent=tt.toFixed(0)+'s';}
  labels.placed.forEach(function(p){
    var g=el('g',{'class':'mark','data-mark':p.m.name},svg);
    el('line',{'class':'mark',x1:p.at,x2:p.at,y1:T,y2:H-B},g);
    el('title',{},g).textContent=p.m.name+' at '+fmt(p.m.t)+' s';
    if(p.row<0){g.setAttribute('data-label','none');return;}
    el('text',{'class':'tick mark-label',x:p.end?p.at-2:p.at+2,y:BAND+(p.row+1)*ROW-2,'text-anchor':p.end?'end':'start'},g).textContent=p.m.name;
  });
  var prev=null;points.forEach(function(p){if(prev!==null&&p.step!==prev){el('line',{'class':'step',x1:x(p.t),x2:x(p.t),y1:T,y2:H-B},svg);}prev=p.step;});
  series.forEach(function(s,k){
    var d='',pen=false;
    points.forEach(function(p){var v=s.get(p);if(v===null||v===undefined){pen=false;return;}d+=(pen?'L':'M')+x(p.t).toFixed(1)+' '+y(v).toFixed(1);pen=true;});
    var g=el('g',{'class':'series','data-series':s.name},svg);
    if(d){el('path',{d:d,fill:'none',stroke:COLORS[k%COLORS.length],'stroke-width':1.8},g);}
    var lg=el('g',{'class':'legend'},svg);
    el('rect',{x:L+8+k*120,y:25,width:10,height:10,fill:COLORS[k%COLORS.length]},lg);
    el('text',{'class':'legend',x:L+22+k*120,y:34},lg).textContent=s.name;
  });
}
function ms(name,idx){return function(p){var m=p.ms[name];return m?m[idx]:null;};}
function draw(points,marks){
  chart('chart-rps','Requests per second','1/s',[{name:'ok',get:function(p){return p.rps;}},{name:'failed',get:function(p){return p.fail_s;}}],points,marks);
  chart('chart-tok','Output tokens per second','tok/s',[{name:'output',get:function(p){return p.tok_s;}}],points,marks);
  chart('chart-ttft','TTFT','ms',[{name:'p50',get:ms('ttft',0)},{name:'p99',get:ms('ttft',1)}],points,marks);
  chart('chart-tpot','TPOT and ITL','ms',[{name:'TPOT p50',get:ms('tpot',0)},{name:'ITL p50',get:ms('itl',0)},{name:'ITL p99',get:ms('itl',1)}],points,marks);
  chart('chart-e2el','E2EL (response time)','ms',[{name:'p50',get:ms('e2el',0)},{name:'p99',get:ms('e2el',1)}],points,marks);
  chart('chart-inflight','Requests in flight','',[{name:'in flight',get:function(p){return p.in_flight;}}],points,marks);
}
window.cicadaCharts={draw:draw,fmt:fmt};
})();
