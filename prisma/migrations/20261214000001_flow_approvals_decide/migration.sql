-- CreateTable
CREATE TABLE "FlowApproval" (
    "id" UUID NOT NULL,
    "flowRequestId" UUID NOT NULL,
    "userId" TEXT NOT NULL,
    "outcome" TEXT,
    "note" TEXT,
    "editedOutput" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "FlowApproval_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "FlowApproval_flowRequestId_userId_key" ON "FlowApproval"("flowRequestId", "userId");

-- AddForeignKey
ALTER TABLE "FlowApproval" ADD CONSTRAINT "FlowApproval_flowRequestId_fkey" FOREIGN KEY ("flowRequestId") REFERENCES "FlowRequest"("id") ON DELETE CASCADE ON UPDATE CASCADE;

